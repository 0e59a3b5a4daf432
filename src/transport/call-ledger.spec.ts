import type { Msg, MsgHdrs, Payload } from '@nats-io/transport-node';
import { CallLedger } from './call-ledger';

function msg(): Msg & { sent: Payload[] } {
  const sent: Payload[] = [];
  return {
    sent,
    respond(data?: Payload, _opts?: { headers?: MsgHdrs }) {
      if (data !== undefined) sent.push(data);
      return true;
    },
  } as unknown as Msg & { sent: Payload[] };
}

describe('CallLedger (each call under the receipt protocol runs once)', () => {
  let t = 1_000_000;
  const now = () => t;

  it('joins a second send of a running call, and replays its answer after it', () => {
    const ledger = new CallLedger(now);
    expect(ledger.arrive('c1', t + 2_000)).toEqual({ kind: 'new' });
    const m = msg();
    ledger.track('c1', m);
    expect(ledger.arrive('c1', t + 2_000)).toEqual({ kind: 'running' });
    m.respond('{"response":1}');
    expect(m.sent).toEqual(['{"response":1}']);
    expect(ledger.arrive('c1', t + 2_000)).toMatchObject({
      kind: 'answered',
      answer: { data: '{"response":1}' },
    });
    expect(ledger.stats).toEqual({
      tracked: 1,
      joined: 1,
      replayed: 1,
      untracked: 0,
      answered: 1,
      unknown: 0,
      bytes: expect.any(Number) as number,
    });
    // A probe finds it; a probe of a call never taken here runs nothing and registers nothing.
    expect(ledger.peek('c1')).toMatchObject({ kind: 'answered' });
    expect(ledger.peek('never-sent')).toEqual({ kind: 'unknown' });
    expect(ledger.stats).toMatchObject({ tracked: 1, unknown: 1 });
    ledger.close();
  });

  it('keeps an answer that is a slice of a shared buffer as its own bytes (not the whole slab)', () => {
    const ledger = new CallLedger(now);
    ledger.arrive('pooled', t + 2_000);
    // A short Buffer.from is a slice of Node's shared pool, as utf8() makes replies.
    const reply = Buffer.from('{"response":1}x');
    expect(reply.buffer.byteLength).toBeGreaterThan(15);
    ledger.track('pooled', msg()).respond(reply);
    const seen = ledger.arrive('pooled', t + 2_000);
    expect(seen.kind).toBe('answered');
    const kept = (seen as { answer: { data: Uint8Array } }).answer.data;
    expect(Buffer.from(kept)).toEqual(Buffer.from(reply));
    expect(kept.buffer.byteLength).toBe(15);
    ledger.close();
  });

  it('drains back to zero: a running entry goes KEEP_MS past its deadline, an answered one ANSWERED_KEEP_MS after its answer', () => {
    const ledger = new CallLedger(now);
    ledger.arrive('answered', t + 60_000);
    ledger.track('answered', msg()).respond('x');
    ledger.arrive('never-answered', t + 1_000);
    ledger.arrive('no-deadline', undefined);
    t += CallLedger.ANSWERED_KEEP_MS - 1;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(3);
    t += 1; // the answer is ANSWERED_KEEP_MS old: gone, long before its 60 s deadline
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(2);
    t += 1_000 + CallLedger.KEEP_MS;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(1); // the one without a deadline is kept longer
    t += CallLedger.NO_DEADLINE_MS;
    ledger.sweep();
    expect(ledger.stats).toMatchObject({ tracked: 0, bytes: 0 });
    // After expiry the same id is a new call.
    expect(ledger.arrive('answered', t + 1_000)).toEqual({ kind: 'new' });
    ledger.close();
  });

  it('is bounded by count: past MAX_ENTRIES live calls, a call is run untracked and counted; a full ledger is swept at most every FULL_SWEEP_MS', () => {
    const ledger = new CallLedger(now, 180_000);
    for (let i = 0; i < CallLedger.MAX_ENTRIES; i++) ledger.arrive(`c${i}`, t + 3_600_000);
    const sweep = jest.spyOn(ledger, 'sweep');
    expect(ledger.arrive('one-more', t + 60_000)).toEqual({ kind: 'new' });
    expect(ledger.arrive('one-more', t + 60_000)).toEqual({ kind: 'new' });
    expect(sweep).toHaveBeenCalledTimes(1);
    expect(ledger.stats).toMatchObject({ tracked: CallLedger.MAX_ENTRIES, untracked: 2 });
    // A deadline further out than the service's cap (here 180 s) is not believed.
    t += 180_000 + CallLedger.KEEP_MS;
    ledger.sweep();
    expect(ledger.stats).toMatchObject({ tracked: 0, bytes: 0 });
    ledger.close();
  });

  it('keeps no call id longer than MAX_ID_CHARS, and no more than MAX_BYTES of keys and answers', () => {
    const ledger = new CallLedger(now);
    const long = 'x'.repeat(900 * 1024); // a 900 KiB id: 300 of them once kept 299 MB
    expect(ledger.arrive(long, t + 60_000)).toEqual({ kind: 'new' });
    expect(ledger.stats).toMatchObject({ tracked: 0, untracked: 1, bytes: 0 });
    expect(CallLedger.acceptsId('x'.repeat(CallLedger.MAX_ID_CHARS))).toBe(true);
    expect(CallLedger.acceptsId('x'.repeat(CallLedger.MAX_ID_CHARS + 1))).toBe(false);
    // Answers count against the byte bound; one that does not fit is not kept.
    const big = 'a'.repeat(CallLedger.MAX_BYTES / 2);
    ledger.arrive('big', t + 60_000);
    const m = msg();
    ledger.track('big', m).respond(big);
    expect(m.sent).toEqual([big]); // answered all the same
    expect(ledger.stats).toMatchObject({ tracked: 0, untracked: 2 });
    ledger.close();
  });
});
