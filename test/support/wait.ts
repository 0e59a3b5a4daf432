/**
 * The one way a test waits (docs/development.md "Tests"): for a condition, never for a
 * fixed time. `src/architecture.spec.ts` fails on a sleep or a polling loop anywhere else.
 */

/**
 * Polls `condition` until it holds, and resolves `true`; after `timeoutMs` it throws, naming
 * the condition (its source) and `what` if given, so a wait that never ends fails the test
 * where it waited instead of being discarded.
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  intervalMs = 10,
  what?: () => string,
): Promise<true> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() >= deadline)
      throw new Error(
        `waited ${timeoutMs} ms for ${condition.toString()}${what ? `\n${what()}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A span of time that is part of what a test does, not a wait for a result: how long a
 * fault lasts (a node down for 1 s), or how a load client paces itself after an error.
 * Never the way to wait for something to happen: that is `waitFor`.
 */
export function pause(ms: number, _why: string): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Keeps this thread busy for `ms`: no timer fires and no I/O is read meanwhile. */
export function busyFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

/** A NATS reply (`{response}` or `{err}`): its response; on an error, fails showing the body. */
export function expectOk<T>(reply: { response?: T; err?: unknown }): T {
  if (reply.err !== undefined && reply.err !== null) {
    throw new Error(`expected a response, got the error ${JSON.stringify(reply.err)}`);
  }
  if (reply.response === undefined) {
    throw new Error(`expected a response, got ${JSON.stringify(reply)}`);
  }
  return reply.response;
}
