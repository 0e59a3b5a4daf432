import { setTimeout as delay } from 'node:timers/promises';

/** Capped exponential backoff with jitter: the one formula for every retry loop. */
export interface BackoffPolicy {
  /** The first delay. */
  baseMs: number;
  /** No delay is longer. */
  maxMs: number;
  /** Fraction of each delay that is randomised (0..1). */
  jitter: number;
}

/** The delay before retry `attempt` (1-based): base·2^(attempt−1), capped, jittered. */
export function backoffMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const base = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(base * (1 - policy.jitter) + base * policy.jitter * random());
}

/** Sleeps `ms`; rejects with `onAbort()` as soon as `signal` aborts. */
export async function sleep(
  ms: number,
  signal?: AbortSignal,
  onAbort?: () => Error,
): Promise<void> {
  try {
    await delay(ms, undefined, { signal });
  } catch (err) {
    if (signal?.aborted && onAbort) throw onAbort();
    throw err;
  }
}
