import { busyFor } from './support/wait';
import { Agent, get } from 'node:http';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * A kept-alive HTTP connection outlives a client's pause. With Node's default 5 s idle
 * timeout, CI failed once with "other side closed": overload.e2e-spec's GET /metrics came
 * after a 20,000-call NATS burst had kept the test process busy for ~5 s, and the client
 * reused a connection the service had just closed (its close not yet read). Reproduced
 * here exactly: one request, the client busy for 6 s, the same connection used again.
 */
describe('HTTP keep-alive outlasts a busy client (e2e, built service process)', () => {
  let svc: ServiceProcess;

  beforeAll(async () => {
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
    });
  }, 60_000);

  afterAll(() => svc.stop());

  it('serves a request on a connection left idle for 6 s while the client was busy', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const status = () =>
      new Promise<{ code?: number; keepAlive?: string }>((resolve, reject) => {
        get(`${svc.url}/health`, { agent }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ code: res.statusCode, keepAlive: String(res.headers['keep-alive']) }),
          );
        }).on('error', reject);
      });
    try {
      expect(await status()).toEqual({ code: 200, keepAlive: 'timeout=65' });
      await new Promise((r) => setImmediate(r)); // the socket is back in the agent's pool
      busyFor(6000); // as a client handling a burst is: no I/O read
      expect((await status()).code).toBe(200);
    } finally {
      agent.destroy();
    }
  }, 30_000);
});
