/** What the `encoder` health indicator reports: whether this encoder can encode, and why. */
export interface EncoderHealthReport {
  up: boolean;
  data: Record<string, unknown>;
}

/**
 * The encoder side of health, whichever process this is: a real probe encode in a single
 * process or a DP worker, the alive ranks in a DP supervisor.
 */
export abstract class EncoderHealth {
  abstract check(): Promise<EncoderHealthReport>;
}
