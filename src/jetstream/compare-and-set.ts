import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';

/**
 * Whether a KV write made with an expected revision (`kv.create`, `kv.update`) was refused
 * because another writer got there first: the compare-and-set lost, and the caller reads
 * the key again. Any other error is the store's.
 */
export function lostCompareAndSet(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      /wrong last sequence/i.test(err.message))
  );
}
