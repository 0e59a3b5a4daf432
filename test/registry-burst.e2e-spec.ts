import type { NatsConnection } from '@nats-io/transport-node';
import { waitFor } from './support/calls';
import { pause } from './support/wait';
import { serviceWithClient, type ServiceProcess } from './support/service-process';

type Answer = {
  noResponders?: true;
  response?: { req_id: string; embedding_len: number; embedding_size: number };
  err?: { code: number; type: string; message: string };
};

/**
 * A burst of registry calls on a lone instance is not overload (found from outside: 2,000
 * concurrent wait_metadata calls and, 300 ms later, their 2,000 publishes on one instance
 * with the defaults: every publish was answered NATS "no responders" and every wait timed
 * out 504, because the gate shed the O(1) registry calls as if they were encodes and the
 * only member of the queue group stepped out of it). Every wait is answered with its own
 * metadata, every publish with null; nothing is shed and no step-out happens.
 */
describe.each([2_000, 10_000])(
  'a burst of %i concurrent waits and their publishes on one instance (e2e)',
  (n) => {
    let svc: ServiceProcess;
    let nc: NatsConnection;
    let prefix: string;
    let close: () => Promise<void>;

    // The defaults (memory store, shedding and stepping out on), as an operator runs it.
    beforeAll(async () => {
      ({ svc, nc, prefix, close } = await serviceWithClient());
    }, 60_000);
    afterAll(() => close?.());

    it('answers every wait with its own value and every publish with null', async () => {
      const waits = new Map<number, Answer>();
      const publishes = new Map<number, Answer>();
      const classify = (map: Map<number, Answer>, base: string) =>
        nc.subscribe(`${base}.*`, {
          callback: (_e, msg) => {
            const i = Number(msg.subject.slice(base.length + 1));
            map.set(i, msg.headers?.code === 503 ? { noResponders: true } : msg.json<Answer>());
          },
        });
      const waitInbox = `_BW.${prefix}`;
      const pubInbox = `_BP.${prefix}`;
      classify(waits, waitInbox);
      classify(publishes, pubInbox);
      await nc.flush();
      const meta = (i: number) => ({
        embedding_size: 4096 * (1 + (i % 7)),
        embedding_len: 1 + (i % 7),
        embedding_dim: 1024,
      });
      for (let i = 0; i < n; i++)
        nc.publish(
          `${prefix}.v1.wait_metadata`,
          JSON.stringify({ req_id: `b-${i}`, timeout_ms: 15_000 }),
          { reply: `${waitInbox}.${i}` },
        );
      await nc.flush();
      await pause(
        300,
        'the publishes follow the waits 300 ms later, as a prefill cluster sends them',
      );
      for (let i = 0; i < n; i++)
        nc.publish(
          `${prefix}.v1.publish_metadata`,
          JSON.stringify({ req_id: `b-${i}`, metadata: meta(i) }),
          { reply: `${pubInbox}.${i}` },
        );
      await nc.flush();
      await waitFor(() => waits.size === n && publishes.size === n, 30_000, 50).catch(
        () => undefined,
      );
      const failedPublishes = [...publishes.values()].filter((a) => a.noResponders || a.err);
      const wrongWaits = [...waits].filter(
        ([i, a]) =>
          a.noResponders ||
          a.err ||
          a.response?.req_id !== `b-${i}` ||
          a.response.embedding_len !== meta(i).embedding_len ||
          a.response.embedding_size !== meta(i).embedding_size,
      );
      expect({
        publishesAnswered: publishes.size,
        publishesFailed: failedPublishes.length,
        firstPublishFailure: failedPublishes[0],
        waitsAnswered: waits.size,
        waitsWrong: wrongWaits.length,
        firstWrongWait: wrongWaits[0]?.[1],
      }).toEqual({
        publishesAnswered: n,
        publishesFailed: 0,
        firstPublishFailure: undefined,
        waitsAnswered: n,
        waitsWrong: 0,
        firstWrongWait: undefined,
      });
      // The registry drained back: no waiter left behind.
      const registry = (await (await fetch(`${svc.url}/admin/registry`)).json()) as {
        waiters: number;
      };
      expect(registry.waiters).toBe(0);
      const metrics = await (await fetch(`${svc.url}/metrics`)).text();
      expect(metrics).toMatch(/epd_encoder_nats_step_outs_total 0\b/);
      // Nothing was refused: a registry burst that drains in time is not overload.
      expect(metrics.match(/^epd_encoder_nats_shed_total\{.*\} [1-9]\d*$/gm)).toBeNull();
    }, 90_000);
  },
);
