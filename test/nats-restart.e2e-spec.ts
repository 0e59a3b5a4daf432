import { pause } from './support/wait';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { waitFor } from './support/calls';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const OUT = process.env.EPD_RELIABILITY_OUT;
const INFLIGHT = 32;

/**
 * nats-server killed (SIGKILL) and restarted on the same port mid-traffic: every call is
 * counted as answered ok, answered with an error, failed on the client (the connection
 * was down), or never answered; the service reconnects by itself and serves again.
 */
describe('nats-server killed and restarted mid-traffic (e2e)', () => {
  let nats: NatsServer;
  let svc: ServiceProcess;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await NatsServer.start();
    svc = await startServiceProcess({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'rs' });
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  }, 60_000);

  afterAll(async () => {
    await nc.close();
    await svc.stop();
    await nats.dispose();
  });

  it('counts every call through the outage, and the service reconnects by itself', async () => {
    const counts = { answered_ok: 0, answered_error: 0, client_failed: 0, never_answered: 0 };
    let stop = false;
    let seq = 0;
    const one = async () => {
      const id = `rs-${seq++}`;
      try {
        await nc.request(
          'rs.v1.publish_metadata',
          JSON.stringify({
            req_id: id,
            metadata: { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 },
          }),
          { timeout: 2000 },
        );
        const reply = (
          await nc.request(
            'rs.v1.wait_metadata',
            JSON.stringify({ req_id: id, timeout_ms: 1000 }),
            {
              timeout: 2000,
            },
          )
        ).json<{ err?: unknown }>();
        counts[reply.err ? 'answered_error' : 'answered_ok']++;
      } catch (err) {
        const timedOut = /timeout/i.test((err as Error).message);
        counts[timedOut ? 'never_answered' : 'client_failed']++;
        await pause(50, 'a client backs off after a failed call');
      }
    };
    const workers = Array.from({ length: INFLIGHT }, async () => {
      while (!stop) await one();
    });
    // Load under way before the fault.
    await waitFor(() => counts.answered_ok >= INFLIGHT * 5, 30_000);
    const before = { ...counts };
    const killedAt = Date.now();
    await nats.kill();
    await pause(1000, 'NATS is down for a second');
    await nats.restart();
    // The service's own reconnection: ready again, and our calls answered again.
    expect(
      await waitFor(async () => (await fetch(`${svc.url}/health/ready`)).ok, 20_000, 100),
    ).toBe(true);
    const reconnectedMs = Date.now() - killedAt;
    const okBefore = counts.answered_ok;
    expect(await waitFor(() => counts.answered_ok > okBefore + 100, 20_000, 50)).toBe(true);
    stop = true;
    await Promise.all(workers);
    const report = {
      ...counts,
      before_outage: before,
      ready_again_after_ms: reconnectedMs,
      // At most the call each client worker had in flight when the server died.
      bound_never_answered: INFLIGHT,
    };
    process.stdout.write(`nats restart: ${JSON.stringify(report)}\n`);
    if (OUT) {
      mkdirSync(OUT, { recursive: true });
      writeFileSync(join(OUT, 'nats-restart.json'), JSON.stringify(report, null, 2));
    }
    expect(counts.answered_ok).toBeGreaterThan(before.answered_ok);
    expect(counts.never_answered).toBeLessThanOrEqual(INFLIGHT);
  }, 90_000);
});
