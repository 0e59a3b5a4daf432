import { pause } from './support/wait';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import request from 'supertest';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { freePort } from './support/nats-server';
import { waitFor, type Reply } from './support/calls';
import { CallLedger } from './support/ledger';
import { MAIN, startServiceProcess } from './support/service-process';
import { SERVICE_NODE_FLAGS } from '../src/common/node-flags';
import { recordFault } from './support/fault-report';

describe('the built service process (e2e)', () => {
  beforeAll(() => {
    if (!existsSync(MAIN))
      throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
  });

  it('on SIGTERM answers pending waits with 503 "encoder shutting down" and exits within 5 s', async () => {
    const port = await freePort();
    const prefix = uniquePrefix();
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, MAIN], {
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
      await waitFor(
        () =>
          request(url)
            .get('/health')
            .then(
              (r) => r.status === 200,
              () => false,
            ),
        20_000,
        100,
        () => `service did not become ready:\n${output}`,
      );

      const ledger = new CallLedger();
      const waits = ['s1', 's2', 's3'].map((id) =>
        ledger.nats('wait_metadata', 10_000, async () =>
          (
            await nc.request(`${prefix}.v1.wait_metadata`, JSON.stringify({ req_id: id }), {
              timeout: 10_000,
            })
          ).json<Reply>(),
        ),
      );
      await waitFor(async () => (await request(url).get('/admin/registry')).body.waiters === 3);

      const started = Date.now();
      ledger.markFault();
      child.kill('SIGTERM');
      const replies = await Promise.all(waits);
      const exit = await exited;
      const tookMs = Date.now() - started;
      recordFault('sigterm', {
        fault: 'SIGTERM with 3 wait_metadata calls pending',
        ledger,
        // A wait answered ok must carry the metadata it waited for; none was ever published.
        silentlyLost: replies.filter((r) => r && !r.err && r.response?.embedding_len === undefined)
          .length,
        // What outlived the process: its own hard exit (work abandoned, not closed).
        leftBehind: exit.code === 0 ? 0 : 1,
      });

      for (const [i, reply] of replies.entries()) {
        expect(reply?.err).toEqual({
          status: 'error',
          code: 503,
          type: 'shutting_down',
          message: 'encoder shutting down',
          req_id: `s${i + 1}`,
        });
      }
      expect(tookMs).toBeLessThan(5000);
      // A clean close exits 0 once the logs are written out (not our hard exit, code 1).
      expect(exit).toMatchObject({ code: 0 });
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

/** Signals and start-up with NATS unreachable (regressions found by the soak's heap readings). */
describe('signals and NATS down at start (e2e, built service)', () => {
  it('heap-snapshot-signal: SIGUSR2 under --heapsnapshot-signal writes a snapshot and the service keeps serving', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'epd-heap-'));
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`,
    });
    try {
      process.kill(svc.proc.pid!, 'SIGUSR2');
      expect(
        await waitFor(() => readdirSync(dir).some((f) => f.endsWith('.heapsnapshot')), 20_000),
      ).toBe(true);
      await pause(
        5000,
        'longer than the shutdown grace: a shutdown the signal began would be over',
      );
      expect(svc.proc.exitCode).toBeNull();
      expect(svc.proc.signalCode).toBeNull();
      expect((await fetch(`${svc.url}/health/ready`)).status).toBe(200);
    } finally {
      await svc.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('cache-peer-nats-down-at-start: with the cache and the shared store, HTTP comes up while NATS is down, and SIGTERM exits cleanly', async () => {
    const port = await freePort(); // nothing listens there
    const svc = await startServiceProcess(
      {
        EPD_NATS_URL: `nats://127.0.0.1:${port}`,
        EPD_REGISTRY_STORE: 'jetstream',
        EPD_CACHE_MAX_BYTES: String(16 * 1024 * 1024),
      },
      '/health/live',
    );
    const exited = new Promise<number | null>((resolve) =>
      svc.proc.once('exit', (code) => resolve(code)),
    );
    const ready = await fetch(`${svc.url}/health/ready`);
    expect(ready.status).toBe(503);
    svc.proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(svc.output()).not.toMatch(/closed before it was established|Unhandled|\n\s+at /);
  }, 60_000);
});
