import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { waitFor } from './support/calls';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };
const BURST = 20_000;

/**
 * Overload sheds instead of timing out (found by the outside review: at 2× the sustainable
 * wait_metadata rate a quarter of the calls timed out on the client, p50 2.8 s, and no
 * 503 was ever sent). A burst far beyond what the process drains within
 * EPD_OVERLOAD_QUEUE_MS is answered in full: each call ok, or 503 `overloaded` at once,
 * or (stepping out, the default) NATS's own 503 "no responders" while the process is out
 * of the queue group.
 */
describe.each([
  { stepOut: true, name: 'shedding and stepping out of the queue group (default)' },
  { stepOut: false, name: 'shedding only (EPD_OVERLOAD_STEP_OUT=false)' },
])(
  'overload, $name: a burst of NATS calls is answered, not left to time out (e2e)',
  ({ stepOut }) => {
    const prefix = uniquePrefix();
    let svc: ServiceProcess;
    let nc: NatsConnection;

    beforeAll(async () => {
      svc = await startServiceProcess({
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_SUBJECT_PREFIX: prefix,
        EPD_OVERLOAD_QUEUE_MS: '20',
        EPD_OVERLOAD_STEP_OUT: String(stepOut),
      });
      nc = await connect({ servers: sharedNatsUrl() });
      for (let i = 0; i < 100; i++) {
        await nc.request(
          `${prefix}.v1.publish_metadata`,
          JSON.stringify({ req_id: `ov-${i}`, metadata: META }),
          { timeout: 5000 },
        );
      }
    }, 60_000);

    afterAll(async () => {
      await nc.close();
      await svc.stop();
    });

    it('answers every call of a 20,000-call burst: ok, or 503 with its req_id; releases are never shed', async () => {
      const inbox = `_OV.${prefix}`;
      type Answer = {
        noResponders?: true;
        err?: { code: number; type: string; message: string; req_id: string };
      };
      const answers = new Map<number, Answer>();
      nc.subscribe(`${inbox}.*`, {
        callback: (_e, msg) => {
          const i = Number(msg.subject.slice(inbox.length + 1));
          // NATS's own answer when no subscriber took the call: a 503 status, no payload.
          answers.set(i, msg.headers?.code === 503 ? { noResponders: true } : msg.json<Answer>());
        },
      });
      await nc.flush();
      const releases = new Set<number>();
      for (let i = 0; i < BURST; i++) {
        const release = i % 1000 === 999;
        if (release) releases.add(i);
        nc.publish(
          `${prefix}.v1.${release ? 'release' : 'wait_metadata'}`,
          JSON.stringify({ req_id: release ? `gone-${i}` : `ov-${i % 100}`, timeout_ms: 30_000 }),
          { reply: `${inbox}.${i}` },
        );
      }
      expect(await waitFor(() => answers.size === BURST, 30_000, 50)).toBe(true);
      const shed = [...answers].filter(([, a]) => a.err?.type === 'overloaded');
      const ok = [...answers].filter(([, a]) => !a.err && !a.noResponders);
      const noResponders = [...answers].filter(([, a]) => a.noResponders);
      expect(ok.length + shed.length + noResponders.length).toBe(BURST);
      expect(shed.length + noResponders.length).toBeGreaterThan(0);
      expect(ok.length).toBeGreaterThan(0);
      for (const [i, a] of shed) {
        expect(releases.has(i)).toBe(false);
        expect(a.err).toMatchObject({ code: 503, req_id: `ov-${i % 100}` });
        expect(a.err!.message).toMatch(/^encoder overloaded; retry after \d+ ms$/);
      }
      // release stays subscribed through a step-out: every one reached the service.
      for (const [i] of noResponders) expect(releases.has(i)).toBe(false);
      // Drained: nothing is left queued, and the metrics say what was shed.
      const metrics = await (await fetch(`${svc.url}/metrics`)).text();
      expect(metrics).toMatch(/epd_encoder_nats_queue_depth 0/);
      const counted = /epd_encoder_nats_shed_total\{dp_type="wait_metadata"\} (\d+)/.exec(metrics);
      expect(Number(counted?.[1] ?? 0)).toBe(shed.length);
      const stepOuts = Number(/epd_encoder_nats_step_outs_total (\d+)/.exec(metrics)?.[1]);
      if (stepOut) {
        expect(stepOuts).toBeGreaterThan(0);
      } else {
        expect(noResponders).toHaveLength(0);
        expect(stepOuts).toBe(0);
      }
      // Back in the group: the next call is served, not refused by NATS.
      expect(metrics).toMatch(/epd_encoder_nats_out_of_group 0/);
      const reply = await nc.request(
        `${prefix}.v1.wait_metadata`,
        JSON.stringify({ req_id: 'ov-1', timeout_ms: 1000 }),
        { timeout: 5000 },
      );
      expect(reply.json()).toMatchObject({ response: { embedding_len: 1 } });
    }, 60_000);
  },
);
