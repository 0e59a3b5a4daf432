import { TimeoutError } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { FORWARD_ATTEMPT_MS, NatsForwarder } from './nats-forwarder';
import type { NatsConnectionService } from './nats-connection.service';

/** A connection whose first `lost` requests get no answer (their timeout fires). */
function forwarder(lost: number) {
  const calls: { timeout: number; body: { timeout_ms: number } }[] = [];
  const nc = {
    info: { max_payload: 1 << 20 },
    request(_subject: string, payload: string, opts: { timeout: number }) {
      calls.push({ timeout: opts.timeout, body: JSON.parse(payload) as { timeout_ms: number } });
      if (calls.length <= lost) return Promise.reject(new TimeoutError());
      return Promise.resolve({ json: () => ({ response: { ok: calls.length } }) });
    },
  };
  const nats = { connection: () => Promise.resolve(nc) } as unknown as NatsConnectionService;
  return { f: new NatsForwarder(nats, new Clock()), calls };
}

const failures = {
  noResponders: () => new Error('gone'),
  timeout: () => new Error('timed out'),
};

describe('NatsForwarder (forwarded calls over at-most-once NATS)', () => {
  it('sends a call again when an attempt gets no answer, within the deadline', async () => {
    const { f, calls } = forwarder(2);
    const deadline = Date.now() + 60_000;
    await expect(f.request('s', { req_id: 'r' }, deadline, 'r', failures)).resolves.toEqual({
      ok: 3,
    });
    expect(calls).toHaveLength(3);
    // Each attempt waits at most FORWARD_ATTEMPT_MS; the owner is told the whole deadline.
    for (const c of calls) {
      expect(c.timeout).toBeLessThanOrEqual(FORWARD_ATTEMPT_MS);
      expect(c.body.timeout_ms).toBeGreaterThan(FORWARD_ATTEMPT_MS);
    }
    expect(f.resent).toBe(2);
  });

  it('gives up with the caller’s timeout error once the deadline is spent', async () => {
    const { f, calls } = forwarder(Infinity);
    await expect(f.request('s', {}, Date.now() + 30, undefined, failures)).rejects.toThrow(
      'timed out',
    );
    expect(calls).toHaveLength(1);
  });
});
