import { loadConfig } from '../config/config.loader';
import { headers, type Msg, type MsgHdrs } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { NatsForwarder } from './nats-forwarder';
import {
  CALL_HEADER,
  PROBE_HEADER,
  PROBE_MS,
  RECEIPT_ATTEMPTS,
  RECEIPT_HEADER,
  RECEIPT_VALUE,
} from './receipts';
import type { NatsConnectionService } from './nats-connection.service';

type Behaviour =
  'lost' | 'answer' | 'receipt-only' | 'no-responders' | 'answer-no-receipt' | 'answer-lost';

/**
 * A connection whose n-th published call behaves as `script[n]` (the last one repeats):
 * lost in transit, taken (a receipt) and answered, taken and never answered, no one
 * subscribed (NATS's 503 status), answered by an owner that sends no receipt, or taken
 * and answered with the answer lost in transit. A receipt names `probe.s` as the subject
 * to ask again on.
 */
function forwarder(script: Behaviour[]) {
  const calls: {
    subject: string;
    body: { timeout_ms: number };
    receipt: boolean;
    callId?: string;
  }[] = [];
  // Wildcard inbox subscriptions (`<prefix>.*`), as the receipt mux makes them.
  const subs = new Map<string, (err: Error | null, msg: Msg) => void>();
  const deliver = (inbox: string, data: string, h?: MsgHdrs) =>
    setImmediate(() =>
      subs.get(inbox.slice(0, inbox.lastIndexOf('.')))?.(null, {
        subject: inbox,
        data: Buffer.from(data),
        headers: h,
        json: () => JSON.parse(data) as unknown,
      } as unknown as Msg),
    );
  const nc = {
    info: { max_payload: 1 << 20 },
    subscribe(pattern: string, opts: { callback: (err: Error | null, msg: Msg) => void }) {
      subs.set(pattern.replace(/\.\*$/, ''), opts.callback);
      return { closed: new Promise(() => undefined) };
    },
    publish(subject: string, payload: string, opts: { reply: string; headers: MsgHdrs }) {
      calls.push({
        subject,
        body: JSON.parse(payload) as { timeout_ms: number },
        receipt: opts.headers.has(RECEIPT_HEADER),
        callId: opts.headers.get(CALL_HEADER),
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
        h.set(PROBE_HEADER, 'probe.s');
        deliver(opts.reply, '', h);
      }
      if (what === 'receipt-only' || what === 'answer-lost') return;
      deliver(opts.reply, JSON.stringify({ response: { ok: calls.length } }));
    },
  };
  const nats = { connection: () => Promise.resolve(nc) } as unknown as NatsConnectionService;
  return { f: new NatsForwarder(nats, new Clock(), loadConfig({}).config), calls };
}

const failures: {
  noResponders: (final: boolean) => Error | undefined;
  unreachable: (taken: boolean) => Error;
  timeout: () => Error;
} = {
  noResponders: () => new Error('gone'),
  unreachable: (taken) => new Error(taken ? 'unreachable (taken, then silent)' : 'unreachable'),
  timeout: () => new Error('timed out'),
};

describe('NatsForwarder (forwarded calls over at-most-once NATS, with receipts)', () => {
  it("forwards to an instance on that instance's own subject for the call", async () => {
    const { f, calls } = forwarder(['answer']);
    await expect(
      f.toInstance('peer-a', 'send', { req_id: 'r' }, Date.now() + 60_000, 'r', failures),
    ).resolves.toEqual({ ok: 1 });
    expect(calls.map((c) => c.subject)).toEqual(['epd.v1.inst.peer-a.send']);
  });

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

  it('once the owner took the call, waits for its answer until the deadline while the owner confirms it', async () => {
    const { f, calls } = forwarder(['receipt-only']);
    await expect(f.request('s', {}, Date.now() + 1_300, 'r', failures)).rejects.toThrow(
      'timed out',
    );
    // The call, then a probe every PROBE_MS on the owner's own subject, each confirmed.
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(calls.length).toBeLessThanOrEqual(1 + Math.ceil(1_300 / PROBE_MS));
    expect(calls.slice(1).every((c) => c.subject === 'probe.s')).toBe(true);
    expect(f.probes).toBe(calls.length - 1);
  });

  it('an answer lost in transit is asked for again (a probe), with the same call id', async () => {
    const { f, calls } = forwarder(['answer-lost', 'answer']);
    const started = Date.now();
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', failures)).resolves.toEqual({
      ok: 2,
    });
    expect(Date.now() - started).toBeLessThan(PROBE_MS * 3);
    expect(calls.map((c) => c.subject)).toEqual(['s', 'probe.s']);
    expect(calls[1]!.callId).toBe(calls[0]!.callId);
    expect(calls[0]!.callId).toMatch(/\w{8,}/);
  });

  it('an owner that took the call and then fell silent is unreachable, long before the deadline', async () => {
    const { f, calls } = forwarder(['answer-lost', 'lost']);
    const started = Date.now();
    await expect(f.request('s', {}, Date.now() + 60_000, 'r', failures)).rejects.toThrow(
      'unreachable (taken, then silent)',
    );
    expect(calls).toHaveLength(1 + RECEIPT_ATTEMPTS);
    expect(Date.now() - started).toBeLessThan(PROBE_MS * (RECEIPT_ATTEMPTS + 3));
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
