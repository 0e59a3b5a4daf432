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
  /** Whether this encoder can encode, shown by doing it (a probe encode, cached briefly). */
  abstract check(): Promise<EncoderHealthReport>;
  /**
   * The cheap half, for readiness: the models are loaded (or the DP workers alive); no
   * forward runs, so a busy encoder with a slow tower stays ready.
   */
  abstract loaded(): EncoderHealthReport;
}
