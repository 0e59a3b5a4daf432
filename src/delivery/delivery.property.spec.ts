import { ProcessOwner } from '../meta-registry/process-owner';
import { restartMemoryFor } from '../meta-registry/restart-memory';
import { pause } from '../../test/support/wait';
import { DestinationPolicy } from './destination-policy';
import fc from 'fast-check';
import { Clock } from '../common/clock';
import { loadConfig } from '../config/config.loader';
import { MemoryMetaStore } from '../meta-registry/memory-meta-store';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { EmbeddingTransport, endpointKey, type Endpoint } from '../transfer/embedding-transport';
import type { Ack, FrameHeader } from '../transfer/frame';
import { DeliveryWire } from './delivery-wire';
import { LifecycleEvents } from '../common/lifecycle-events';
import { DeliveryService } from './delivery.service';
import { ReqStateStore, type ReqState } from '../requests/req-state.store';
import { RequestLifecycle } from '../requests/request-lifecycle.service';

/**
 * Property: for random interleavings of encode (start, succeed, fail), register, send,
 * release and time passing (deadlines, TTL) over a few req_ids and receivers:
 * - no phantom success: every successful send was delivered to that receiver, for that
 *   request generation, with that generation's bytes;
 * - no double delivery: a receiver gets a generation at most as often as it asked for it
 *   (its sends plus its one registration);
 * - completion counts distinct receivers, and everything settles with 0 staged bytes,
 *   no state, no waiter.
 */
const RUNS = Number(process.env.EPD_PROPERTY_RUNS ?? 1000);
const IDS = ['a', 'b'];
const DESTS = [7001, 7002, 7003];
const TTL = 1000;

class FakeTransport extends EmbeddingTransport {
  delivered: { reqId: string; generation: number; dest: string; bytes: number }[] = [];
  failing = new Set<number>();
  generationOf: (reqId: string) => number = () => 0;

  async send(endpoint: Endpoint, header: FrameHeader, payload: Uint8Array): Promise<Ack> {
    await pause(5, 'a network round trip');
    if (this.failing.has(endpoint.port)) throw new Error('receiver refused');
    this.delivered.push({
      reqId: header.req_id,
      generation: payload[0]!,
      dest: endpointKey(endpoint),
      bytes: payload.byteLength,
    });
    return { req_id: header.req_id, ok: true };
  }
}

type Cmd =
  | { t: 'start'; id: string }
  | { t: 'finish'; id: string; ok: boolean }
  | { t: 'register'; id: string; port: number; count: number }
  | { t: 'send'; id: string; port: number; count?: number }
  | { t: 'release'; id: string }
  | { t: 'fail'; port: number; on: boolean }
  | { t: 'advance'; ms: number };

const id = fc.constantFrom(...IDS);
const port = fc.constantFrom(...DESTS);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ t: fc.constant('start' as const), id }),
  fc.record({ t: fc.constant('finish' as const), id, ok: fc.boolean() }),
  fc.record({
    t: fc.constant('register' as const),
    id,
    port,
    count: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({
    t: fc.constant('send' as const),
    id,
    port,
    count: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  }),
  fc.record({ t: fc.constant('release' as const), id }),
  fc.record({ t: fc.constant('fail' as const), port, on: fc.boolean() }),
  fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 600 }) }),
);

describe('delivery lifecycle property', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('never reports a phantom success or delivers twice, and always drains to zero', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { maxLength: 30 }), async (cmds) => {
        jest.clearAllTimers();
        jest.setSystemTime(0);
        const { config } = loadConfig({
          EPD_RESTART_LEDGER: 'off',
          EPD_SEND_TIMEOUT_MS: String(TTL),
          EPD_STAGING_MAX_BYTES: '1000000',
        });
        const clock = new Clock();
        const events = new LifecycleEvents();
        const states = new ReqStateStore(config, clock, events);
        const registry = new MetaRegistry(
          new MemoryMetaStore(1000),
          config,
          clock,
          ProcessOwner.single(config.instance.id),
          restartMemoryFor(config, clock, false),
        );
        const lifecycle = new RequestLifecycle(states, registry, events);
        const transport = new FakeTransport();
        const delivery = new DeliveryService(
          config,
          clock,
          states,
          new DeliveryWire(config, transport, new DestinationPolicy(config), events),
          lifecycle,
          new DestinationPolicy(config),
        );

        let generation = 0;
        const gen = new Map<ReqState, number>();
        const encoding = new Map<string, ReqState>();
        const asks = new Map<string, number>(); // `${generation}|${dest}` → times asked
        const successes: { reqId: string; generation: number; dest: string; bytes: number }[] = [];
        const pending: Promise<unknown>[] = [];
        const ask = (g: number, p: number) => {
          const k = `${g}|127.0.0.1:${p}`;
          asks.set(k, (asks.get(k) ?? 0) + 1);
        };

        for (const c of cmds) {
          switch (c.t) {
            case 'start': {
              if (encoding.has(c.id)) break;
              try {
                const s = states.begin(c.id, 'image', 0, 1);
                gen.set(s, ++generation);
                encoding.set(c.id, s);
              } catch {
                /* 409: active or tombstoned */
              }
              break;
            }
            case 'finish': {
              const s = encoding.get(c.id);
              if (!s) break;
              encoding.delete(c.id);
              if (c.ok && !s.releaseRequested) {
                const bytes = 16;
                try {
                  states.reserve(s, bytes);
                  const data = new Float32Array(4).fill(0);
                  new Uint8Array(data.buffer)[0] = gen.get(s)!;
                  states.stage(s, {
                    data,
                    tokens: 1,
                    dim: 4,
                    dtype: 'float32',
                    bytes,
                    grid: [[1, 2, 2]],
                  });
                } catch {
                  states.discard(s);
                }
              } else {
                states.discard(s);
              }
              states.finishEncode(s);
              break;
            }
            case 'register': {
              const s = states.get(c.id);
              pending.push(
                delivery
                  .register(
                    { req_id: c.id, receive_count: c.count, receive_url: `127.0.0.1:${c.port}` },
                    Date.now() + 200,
                  )
                  .then(() => {
                    const now = states.get(c.id);
                    if (now && now === (s ?? now)) ask(gen.get(now)!, c.port);
                  })
                  .catch(() => undefined),
              );
              break;
            }
            case 'send': {
              const s = states.get(c.id);
              const g = s ? gen.get(s)! : -1;
              if (s) ask(g, c.port);
              pending.push(
                delivery
                  .send(
                    {
                      req_id: c.id,
                      prefill_host: '127.0.0.1',
                      embedding_port: c.port,
                      receive_count: c.count,
                    },
                    Date.now() + 300,
                  )
                  .then((r) =>
                    successes.push({
                      reqId: c.id,
                      generation: g,
                      dest: `127.0.0.1:${c.port}`,
                      bytes: r.bytes,
                    }),
                  )
                  .catch(() => undefined),
              );
              break;
            }
            case 'release':
              pending.push(lifecycle.release(c.id));
              break;
            case 'fail':
              if (c.on) transport.failing.add(c.port);
              else transport.failing.delete(c.port);
              break;
            case 'advance':
              await jest.advanceTimersByTimeAsync(c.ms);
              states.sweep();
              break;
          }
          await jest.advanceTimersByTimeAsync(0);
        }

        // Finish whatever is still encoding, then let every deadline and TTL pass.
        for (const s of encoding.values()) {
          states.discard(s);
          states.finishEncode(s);
        }
        await jest.advanceTimersByTimeAsync(TTL + 500);
        await Promise.all(pending);
        states.sweep();
        await jest.advanceTimersByTimeAsync(TTL + 500);
        states.sweep();

        // No phantom success: each success was really delivered, with its generation's bytes.
        for (const ok of successes) {
          expect(ok.generation).toBeGreaterThan(0);
          expect(transport.delivered).toContainEqual({
            reqId: ok.reqId,
            generation: ok.generation,
            dest: ok.dest,
            bytes: 16,
          });
          expect(ok.bytes).toBe(16);
        }
        // No double delivery: never more deliveries than asks, per generation and receiver.
        const delivered = new Map<string, number>();
        for (const d of transport.delivered) {
          const k = `${d.generation}|${d.dest}`;
          delivered.set(k, (delivered.get(k) ?? 0) + 1);
        }
        for (const [k, n] of delivered) expect(n).toBeLessThanOrEqual(asks.get(k) ?? 0);
        // Everything drains.
        expect(states.stats()).toMatchObject({ states: 0, usedBytes: 0, startWaiters: 0 });
        registry.close();
      }),
      { numRuns: RUNS },
    );
  });
});
