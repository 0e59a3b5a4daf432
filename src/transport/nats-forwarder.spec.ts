import { headers, type Msg, type MsgHdrs } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { NatsForwarder, RECEIPT_ATTEMPTS, RECEIPT_HEADER, RECEIPT_VALUE } from './nats-forwarder';
import type { NatsConnectionService } from './nats-connection.service';

type Behaviour = 'lost' | 'answer' | 'receipt-only' | 'no-responders' | 'answer-no-receipt';

/**
 * A connection whose n-th published call behaves as `script[n]` (the last one repeats):
 * lost in transit, taken (a receipt) and answered, taken and never answered, no one
 * subscribed (NATS's 503 status), or answered by an owner that sends no receipt.
 */
function forwarder(script: Behaviour[]) {
  const calls: { subject: string; body: { timeout_ms: number }; receipt: boolean }[] = [];
  const subs = new Map<string, (err: Error | null, msg: Msg) => void>();
  const deliver = (inbox: string, data: string, h?: MsgHdrs) =>
    setImmediate(() =>
      subs.get(inbox)?.(null, {
        data: Buffer.from(data),
        headers: h,
        json: () => JSON.parse(data) as unknown,
      } as unknown as Msg),
    );
  const nc = {
    info: { max_payload: 1 << 20 },
    subscribe(inbox: string, opts: { callback: (err: Error | null, msg: Msg) => void }) {
      subs.set(inbox, opts.callback);
      return { unsubscribe: () => subs.delete(inbox) };
    },
    publish(subject: string, payload: string, opts: { reply: string; headers: MsgHdrs }) {
      calls.push({
        subject,
        body: JSON.parse(payload) as { timeout_ms: number },
        receipt: opts.headers.has(RECEIPT_HEADER),
      });
      const what = script[Math.min(calls.length, script.length) - 1]!;
      if (what === 'lost') return;
      if (what === 'no-responders') {
        const h = headers(503, 'No Responders');
        return deliver(opts.reply, '', h);
      }
      if (what !== 'answer-no-receipt') {
        const h = headers();
        h.set(RECEIPT_HEADER, RECEIPT_VALUE);
        deliver(opts.reply, '', h);
      }
      if (what === 'receipt-only') return;
      deliver(opts.reply, JSON.stringify({ response: { ok: calls.length } }));
    },
  };
  const nats = { connection: () => Promise.resolve(nc) } as unknown as NatsConnectionService;
  return { f: new NatsForwarder(nats, new Clock()), calls };
}

const failures: {
  noResponders: (final: boolean) => Error | undefined;
  unreachable: () => Error;
  timeout: () => Error;
} = {
  noResponders: () => new Error('gone'),
  unreachable: () => new Error('unreachable'),
  timeout: () => new Error('timed out'),
};

describe('NatsForwarder (forwarded calls over at-most-once NATS, with receipts)', () => {
  it('sends a call again when an attempt is not acknowledged, and asks for a receipt each time', async () => {
    const { f, calls } = forwarder(['lost', 'answer']);
    const deadline = Date.now() + 60_000;
    await expect(f.request('s', { req_id: 'r' }, deadline, 'r', failures)).resolves.toEqual({
      ok: 2,
    });
    expect(calls).toHaveLength(2);
    // The owner is told the whole remaining deadline each time.
    for (const c of calls) {
      expect(c.receipt).toBe(true);
      expect(c.body.timeout_ms).toBeGreaterThan(59_000);
    }
    expect(f.resent).toBe(1);
  });

  it('calls the owner unreachable after every attempt went unacknowledged, long before the deadline', async () => {
    const { f, calls } = forwarder(['lost']);
    const started = Date.now();
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', failures)).rejects.toThrow(
      'unreachable',
    );
    expect(calls).toHaveLength(RECEIPT_ATTEMPTS);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('once the owner took the call, waits for its answer until the deadline, not sending it again', async () => {
    const { f, calls } = forwarder(['receipt-only']);
    await expect(f.request('s', {}, Date.now() + 400, 'r', failures)).rejects.toThrow('timed out');
    expect(calls).toHaveLength(1);
  });

  it('no responders is the owner gone, at once', async () => {
    const { f, calls } = forwarder(['no-responders']);
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', failures)).rejects.toThrow('gone');
    expect(calls).toHaveLength(1);
  });

  it('no responders from an owner that may be alive (moving to another node) is an attempt lost in transit', async () => {
    const { f, calls } = forwarder(['no-responders', 'answer']);
    const maybe = {
      ...failures,
      noResponders: (final: boolean) => (final ? new Error('gone') : undefined),
    };
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', maybe)).resolves.toEqual({ ok: 2 });
    expect(calls).toHaveLength(2);
  });

  it('no responders on every attempt is the owner gone, even while it may still look alive', async () => {
    const { f, calls } = forwarder(['no-responders']);
    const maybe = {
      ...failures,
      noResponders: (final: boolean) => (final ? new Error('gone') : undefined),
    };
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', maybe)).rejects.toThrow('gone');
    expect(calls).toHaveLength(RECEIPT_ATTEMPTS);
  });

  it('an answer without a receipt (an owner that sends none) is the answer', async () => {
    const { f } = forwarder(['answer-no-receipt']);
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', failures)).resolves.toEqual({
      ok: 1,
    });
  });
});
