import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/nats-core';
import { RECEIPT_ATTEMPTS, RECEIPT_MS, requestWithReceipts } from './receipts';

/**
 * A connection whose every send meets "no responders" (the callee is gone), each after
 * the delay `delays[attempt]` ms (what a busy machine does to the server's replies), or
 * never (Infinity: lost in transit).
 */
function goneCallee(delays: number[]): { nc: NatsConnection; sends: () => number } {
  let callback: ((err: Error | null, msg: Msg) => void) | undefined;
  let sends = 0;
  const nc = {
    options: {},
    subscribe: (_subject: string, opts: { callback: typeof callback }) => {
      callback = opts.callback;
      return { closed: new Promise(() => undefined) };
    },
    publish: (_subject: string, _body: string, opts: { reply: string }) => {
      const delay = delays[sends++] ?? 0;
      if (!Number.isFinite(delay)) return; // lost in transit: no reply at all
      setTimeout(() => {
        const headers = { code: 503, get: () => '' } as unknown as MsgHdrs;
        callback?.(null, { subject: opts.reply, headers, data: new Uint8Array(0) } as Msg);
      }, delay);
    },
  } as unknown as NatsConnection;
  return { nc, sends: () => sends };
}

describe('requestWithReceipts: a callee that is gone', () => {
  const call = (nc: NatsConnection) =>
    requestWithReceipts(nc, {
      subject: 'x.inst.a.send',
      body: () => '{}',
      deadline: Date.now() + 10_000,
      now: () => Date.now(),
      // Gone only when every send met no responders (the owner router's rule while the
      // roster still lists the callee).
      gone: (final) => final,
    });

  it('is gone when every send meets no responders in time', async () => {
    const { nc, sends } = goneCallee([5, 5, 5]);
    await expect(call(nc)).resolves.toEqual({ kind: 'gone' });
    expect(sends()).toBe(RECEIPT_ATTEMPTS);
  });

  it("is gone, not unreachable, when the last send's no responders comes after RECEIPT_MS", async () => {
    // Before: unreachable at the third tick, the late reply ignored.
    const { nc, sends } = goneCallee([5, 5, RECEIPT_MS + 100]);
    await expect(call(nc)).resolves.toEqual({ kind: 'gone' });
    expect(sends()).toBe(RECEIPT_ATTEMPTS);
  });

  it('is gone when every no responders comes late', async () => {
    const { nc } = goneCallee([RECEIPT_MS + 100, RECEIPT_MS + 100, RECEIPT_MS + 100]);
    await expect(call(nc)).resolves.toEqual({ kind: 'gone' });
  });

  it('is unreachable when nothing at all comes back (lost in transit, not gone)', async () => {
    const { nc } = goneCallee([Infinity, Infinity, Infinity]);
    await expect(call(nc)).resolves.toEqual({ kind: 'unreachable', received: false });
  });
});
