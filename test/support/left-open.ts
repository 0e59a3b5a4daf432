/**
 * What a test file started and has not stopped yet: service processes, nats-servers and
 * in-process apps. A test that fails before its own cleanup leaves them running, and their
 * handles keep jest from exiting (a failing rolling-restart test once held the run until
 * CI's time limit). `test/support/after-file.ts` stops whatever is left after every file,
 * by PID, so a failed run reports and ends.
 */
const open = new Set<{ close: () => Promise<unknown> }>();

/** Records `thing` as open until `close` runs; returns a `close` that also forgets it. */
export function leftOpen<T extends { close: () => Promise<unknown> }>(
  thing: T,
): () => Promise<void> {
  open.add(thing);
  return async () => {
    open.delete(thing);
    await thing.close();
  };
}

/** Closes everything still open, whatever fails; how many there were. */
export async function closeLeftOpen(): Promise<number> {
  const left = [...open];
  open.clear();
  await Promise.allSettled(left.map((t) => t.close()));
  return left.length;
}
