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
    });
    // A probe finds it; a probe of a call never taken here runs nothing and registers nothing.
    expect(ledger.peek('c1')).toMatchObject({ kind: 'answered' });
    expect(ledger.peek('never-sent')).toEqual({ kind: 'unknown' });
    expect(ledger.stats).toMatchObject({ tracked: 1, unknown: 1 });
    ledger.close();
  });

  it('drains back to zero: an entry goes KEEP_MS past its deadline, answered or not', () => {
    const ledger = new CallLedger(now);
    ledger.arrive('answered', t + 1_000);
    ledger.track('answered', msg()).respond('x');
    ledger.arrive('never-answered', t + 1_000);
    ledger.arrive('no-deadline', undefined);
    t += 1_000 + CallLedger.KEEP_MS - 1;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(3);
    t += 1;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(1); // the one without a deadline is kept longer
    t += CallLedger.NO_DEADLINE_MS;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(0);
    // After expiry the same id is a new call.
    expect(ledger.arrive('answered', t + 1_000)).toEqual({ kind: 'new' });
    ledger.close();
  });

  it('is bounded: past MAX_ENTRIES live calls, a call is run untracked and counted', () => {
    const ledger = new CallLedger(now);
    for (let i = 0; i < CallLedger.MAX_ENTRIES; i++) ledger.arrive(`c${i}`, t + 60_000);
    expect(ledger.arrive('one-more', t + 60_000)).toEqual({ kind: 'new' });
    expect(ledger.arrive('one-more', t + 60_000)).toEqual({ kind: 'new' });
    expect(ledger.stats).toMatchObject({ tracked: CallLedger.MAX_ENTRIES, untracked: 2 });
    // A deadline further out than MAX_DEADLINE_MS is not believed.
    t += CallLedger.MAX_DEADLINE_MS + CallLedger.KEEP_MS;
    ledger.sweep();
    expect(ledger.stats.tracked).toBe(0);
    ledger.close();
  });
});
