import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import request from 'supertest';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { freePort } from './support/nats-server';
import { recordFault } from './support/fault-report';

const MAIN = join(__dirname, '..', 'dist', 'main.js');

describe('the built service process (e2e)', () => {
  beforeAll(() => {
    if (!existsSync(MAIN))
      throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
  });

  it('on SIGTERM answers pending waits with 503 "encoder shutting down" and exits within 5 s', async () => {
    const port = await freePort();
    const prefix = uniquePrefix();
    const child = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_HTTP_PORT: String(port),
        EPD_SUBJECT_PREFIX: prefix,
        EPD_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const url = `http://127.0.0.1:${port}`;
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      const ready = Date.now() + 20_000;
      for (;;) {
        const status = await request(url)
          .get('/health')
          .then(
            (r) => r.status,
            () => 0,
          );
        if (status === 200) break;
        if (Date.now() > ready) throw new Error(`service did not become ready:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }

      const waits = ['s1', 's2', 's3'].map((id) =>
        nc
          .request(`${prefix}.v1.wait_metadata`, JSON.stringify({ req_id: id }), {
            timeout: 10_000,
          })
          .then((m) => m.json<{ err?: unknown }>()),
      );
      for (;;) {
        const res = await request(url).get('/admin/registry');
        if (res.body.waiters === 3) break;
        await new Promise((r) => setTimeout(r, 20));
      }

      const started = Date.now();
      child.kill('SIGTERM');
      const replies = await Promise.all(waits);
      const exit = await exited;
      const tookMs = Date.now() - started;
      recordFault('sigterm', {
        fault: 'SIGTERM with 3 wait_metadata calls pending',
        calls: replies.length,
        answeredOk: replies.filter((r) => !r.err).length,
        answeredError: replies.filter((r) => r.err).length,
        neverAnswered: 0, // Promise.all above: every one was answered
        silentlyLost: 0,
        leftBehind: exit.code === 0 || exit.signal === 'SIGTERM' ? 0 : 1,
        slowestMs: tookMs,
      });

      for (const [i, reply] of replies.entries()) {
        expect(reply.err).toEqual({
          status: 'error',
          code: 503,
          type: 'shutting_down',
          message: 'encoder shutting down',
          req_id: `s${i + 1}`,
        });
      }
      expect(tookMs).toBeLessThan(5000);
      // Nest re-raises the signal after a clean close; either way it was not our 1 s hard exit.
      expect(exit.code === 0 || exit.signal === 'SIGTERM').toBe(true);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await nc.drain();
    }
  });

  it('refuses to start on an invalid setting, naming the key and variable', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: { ...process.env, EPD_HTTP_PORT: 'not-a-port' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const code = await new Promise<number | null>((resolve) =>
      child.once('exit', (c) => resolve(c)),
    );
    expect(code).toBe(78);
    expect(stderr).toMatch(/http\.port \(EPD_HTTP_PORT\)/);
  });
});
