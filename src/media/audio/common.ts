/** What every audio decoder shares: the error type, the decoded form, the rate bounds. */
export class AudioDecodeError extends Error {}

export interface DecodedAudio {
  sampleRate: number;
  channels: number;
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
}

/** The lowest and highest sample rates a WAV header may claim (a 1 Hz header is a bomb). */
export const MIN_SAMPLE_RATE = 8000;
export const MAX_SAMPLE_RATE = 192000;
