import fc from 'fast-check';
import { TimeoutError } from 'rxjs';
import { MMError } from '../common/errors/mm-error';
import { makeRegistry } from './testing';

/**
 * Property: for random interleavings of publish, wait, discard, time passing (timeouts
 * and TTL sweeps) and cancel over a few req_ids, every waiter gets exactly one outcome,
 * the one a simple model predicts; and once everything settles the registry is empty.
 */
const RUNS = Number(process.env.EPD_PROPERTY_RUNS ?? 1000);
const TTL = 500;
const SWEEP = 100;
const IDS = ['a', 'b', 'c'];

type Outcome =
  | { kind: 'value'; len: number }
  | { kind: 'error'; message: string }
  | { kind: 'timeout' }
  | { kind: 'cancelled' };

type Cmd =
  | { t: 'publish'; id: string; error: boolean }
  | { t: 'wait'; id: string; timeout: number }
  | { t: 'discard'; id: string }
  | { t: 'advance'; ms: number }
  | { t: 'cancel'; k: number };

const id = fc.constantFrom(...IDS);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ t: fc.constant('publish' as const), id, error: fc.boolean() }),
  fc.record({ t: fc.constant('wait' as const), id, timeout: fc.integer({ min: 1, max: 400 }) }),
  fc.record({ t: fc.constant('discard' as const), id }),
  fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 300 }) }),
  fc.record({ t: fc.constant('cancel' as const), k: fc.nat() }),
);

interface ModelWaiter {
  id: string;
  deadline: number;
  expected?: Outcome;
}

class Model {
  now = 0;
  entries = new Map<string, { outcome: Outcome; at: number }>();
  waiters: ModelWaiter[] = [];

  /** Moves time to `to`, firing deadlines and sweep ticks in time order. */
  advance(to: number): void {
    for (;;) {
      const nextSweep = (Math.floor(this.now / SWEEP) + 1) * SWEEP;
      const pending = this.waiters.filter((w) => !w.expected);
      const nextDeadline = Math.min(...pending.map((w) => w.deadline), Infinity);
      const next = Math.min(nextSweep, nextDeadline);
      if (next > to) break;
      this.now = next;
      // RxJS timers and the sweep interval fire in the order they were scheduled; at
      // equal times the observable outcome is the same, so order does not matter here.
      for (const w of pending) if (w.deadline === next) w.expected = { kind: 'timeout' };
      if (next === nextSweep) {
        for (const [k, e] of this.entries) if (e.at < next - TTL) this.entries.delete(k);
      }
    }
    this.now = to;
  }
}

describe('MetaRegistry property', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('every waiter gets exactly one outcome, consistent with the sequence, and nothing leaks', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { maxLength: 40 }), async (cmds) => {
        jest.clearAllTimers();
        jest.setSystemTime(0);
        const { registry } = makeRegistry({
          EPD_SEND_TIMEOUT_MS: String(TTL),
          EPD_REGISTRY_SWEEP_INTERVAL_MS: String(SWEEP),
        });
        registry.onModuleInit();
        const model = new Model();
        const actual: Outcome[][] = [];
        const subs: { unsubscribe(): void }[] = [];
        let seq = 0;

        for (const c of cmds) {
          switch (c.t) {
            case 'publish': {
              const len = ++seq;
              const outcome: Outcome = c.error
                ? { kind: 'error', message: `boom-${len}` }
                : { kind: 'value', len };
              await registry.publish(
                c.id,
                c.error
                  ? { error: `boom-${len}` }
                  : { embedding_len: len, embedding_dim: 8, embedding_size: len * 32 },
              );
              model.entries.set(c.id, { outcome, at: model.now });
              for (const w of model.waiters) if (w.id === c.id && !w.expected) w.expected = outcome;
              break;
            }
            case 'wait': {
              const outcomes: Outcome[] = [];
              actual.push(outcomes);
              const present = model.entries.get(c.id);
              model.waiters.push({
                id: c.id,
                deadline: model.now + c.timeout,
                expected: present?.outcome,
              });
              subs.push(
                registry.wait$(c.id, { timeoutMs: c.timeout }).subscribe({
                  next: (r) =>
                    outcomes.push({
                      kind: 'value',
                      len: (r.metadata as { embedding_len: number }).embedding_len,
                    }),
                  error: (e: unknown) => {
                    if (e instanceof TimeoutError) outcomes.push({ kind: 'timeout' });
                    else if (e instanceof MMError)
                      outcomes.push({ kind: 'error', message: e.message });
                    else outcomes.push({ kind: 'error', message: String(e) });
                  },
                }),
              );
              break;
            }
            case 'discard':
              await registry.discard(c.id);
              model.entries.delete(c.id);
              break;
            case 'advance':
              model.advance(model.now + c.ms);
              await jest.advanceTimersByTimeAsync(c.ms);
              break;
            case 'cancel': {
              if (subs.length === 0) break;
              const k = c.k % subs.length;
              const w = model.waiters[k]!;
              subs[k]!.unsubscribe();
              if (!w.expected) {
                w.expected = { kind: 'cancelled' };
                actual[k]!.push({ kind: 'cancelled' });
              }
              break;
            }
          }
          await jest.advanceTimersByTimeAsync(0);
        }

        // Let every deadline and TTL pass.
        model.advance(model.now + 400 + TTL + 2 * SWEEP);
        await jest.advanceTimersByTimeAsync(400 + TTL + 2 * SWEEP);

        model.waiters.forEach((w, i) => {
          expect(actual[i]).toHaveLength(1);
          expect(actual[i]![0]).toEqual(w.expected);
        });
        const stats = await registry.stats();
        expect(stats).toMatchObject({ waiters: 0, waitedReqIds: 0, entries: 0 });
        const count = (kind: Outcome['kind']) =>
          model.waiters.filter((w) => w.expected?.kind === kind).length;
        expect(stats.counters).toMatchObject({
          waits: model.waiters.length,
          timeouts: count('timeout'),
          cancelled: count('cancelled'),
          resolved: count('value') + count('error'),
          failed: 0,
        });
        registry.close();
      }),
      { numRuns: RUNS },
    );
  });
});
