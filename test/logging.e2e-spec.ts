import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { waitFor } from './support/calls';
import { freePort } from './support/nats-server';
import { childPids, startServiceProcess, type ServiceProcess } from './support/service-process';
import { SERVICE_NODE_FLAGS } from '../src/common/node-flags';

/** The log lines an operator greps by req_id: NATS lines carry the dp_type, none repeats req_id. */
describe('log context (e2e, built service process)', () => {
  let svc: ServiceProcess;
  let prefix: string;
  beforeAll(async () => {
    prefix = uniquePrefix();
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_LOG_LEVEL: 'warn',
    });
  });
  afterAll(() => svc.stop());

  const lines = () =>
    svc
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
  const lineAbout = (reqId: string) => lines().find((l) => l.includes(`"req_id":"${reqId}"`));

  it('a NATS handler log line carries req_id and dp_type', async () => {
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      await nc.request(
        `${prefix}.v1.wait_metadata`,
        JSON.stringify({ req_id: 'log-nats', timeout_ms: 1 }),
      );
    } finally {
      await nc.drain();
    }
    await waitFor(
      () => lineAbout('log-nats') !== undefined,
      5000,
      10,
      () => `OUT>${svc.output().slice(-3000)}`,
    );
    const line = lineAbout('log-nats')!;
    expect(JSON.parse(line)).toMatchObject({
      req_id: 'log-nats',
      dp_type: 'wait_metadata',
      msg: 'encode metadata not ready',
    });
    expect(line.match(/"req_id"/g)).toHaveLength(1);
  });

  it('an HTTP error log line carries req_id once', async () => {
    await fetch(`${svc.url}/scheduler_receive_meta_data`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ req_id: 'log-http', timeout_ms: 1 }),
    });
    expect(await waitFor(() => lineAbout('log-http') !== undefined)).toBe(true);
    const line = lineAbout('log-http')!;
    expect(JSON.parse(line)).toMatchObject({
      req_id: 'log-http',
      msg: 'encode metadata not ready',
    });
    expect(line.match(/"req_id"/g)).toHaveLength(1);
  });
});

/**
 * http-logging-taxes-every-promise: nestjs-pino's middleware bound a per-request logger
 * with AsyncLocalStorage. After the first HTTP request (a health probe is enough), Node
 * 20's promise hooks ran for every promise of the process, NATS calls included:
 * wait_metadata throughput 0.69-0.71x raw NATS with them, 0.76-0.82x without (quick
 * bench runs). HTTP lines are logged without it now; this shows no promise is tracked
 * after HTTP and NATS traffic, and that the request lines are still written.
 */
describe('HTTP request logging without AsyncLocalStorage (e2e, built service process)', () => {
  it('leaves promise hooks off after HTTP and NATS traffic, and still logs each request once', async () => {
    const prefix = uniquePrefix();
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_LOG_LEVEL: 'info',
      EPD_LOG_FORMAT: 'json',
      NODE_OPTIONS: `--require ${join(__dirname, 'fixtures', 'probes', 'promise-hooks.js')}`,
    });
    try {
      const nc = await connect({ servers: sharedNatsUrl() });
      await nc.request(
        `${prefix}.v1.wait_metadata`,
        JSON.stringify({ req_id: 'h', timeout_ms: 1 }),
      );
      await nc.drain();
      await fetch(`${svc.url}/scheduler_receive_meta_data`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'http-req-1' },
        body: JSON.stringify({ req_id: 'als-http', timeout_ms: 1 }),
      });
      await fetch(`${svc.url}/admin/registry`);
      svc.proc.kill('SIGWINCH');
      expect(await waitFor(() => svc.output().includes('PROMISE_HOOKS'))).toBe(true);
      expect(/PROMISE_HOOKS (\d+)/.exec(svc.output())![1]).toBe('0');
      const json = svc
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map(
          (l) =>
            JSON.parse(l) as {
              req?: { id?: string };
              req_id?: string;
              request_id?: string;
              msg: string;
            },
        );
      // The error line names the req_id and the request id of its pino-http line.
      expect(
        json.filter((l) => l.msg === 'encode metadata not ready' && l.req_id === 'als-http'),
      ).toEqual([expect.objectContaining({ request_id: 'http-req-1' })]);
      expect(json.filter((l) => l.req?.id === 'http-req-1')).toEqual([
        expect.objectContaining({ req_id: 'als-http', msg: 'request errored' }),
      ]);
    } finally {
      await svc.stop();
    }
  });
});

/**
 * The V8 flags npm start launches the service with (SERVICE_NODE_FLAGS) cannot be set from
 * inside it; someone who runs `node dist/main.js` bare is told what is missing, once.
 */
describe('launch flags (e2e, built service process)', () => {
  const warning =
    /started without --max-semi-space-size=64\b.*node --max-semi-space-size=64 dist\/main\.js/;
  const start = (flags: readonly string[], env: Record<string, string> = {}) =>
    startServiceProcess(
      {
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_SUBJECT_PREFIX: uniquePrefix(),
        EPD_LOG_LEVEL: 'warn',
        ...env,
      },
      '/health/ready',
      flags,
    );

  // Written before the service is ready: the silent case below is checked at the same point.
  it('warns at start-up, naming the flag and the command line, when launched without them', async () => {
    const svc = await start([]);
    try {
      expect(svc.output().match(new RegExp(warning, 'g'))).toHaveLength(1);
    } finally {
      await svc.stop();
    }
  }, 30_000);

  it('is silent when launched as npm start launches it, or with the flags in NODE_OPTIONS', async () => {
    for (const svc of [
      await start(SERVICE_NODE_FLAGS),
      await start([], { NODE_OPTIONS: SERVICE_NODE_FLAGS.join(' ') }),
    ]) {
      try {
        expect(svc.output()).not.toMatch(/started without/);
      } finally {
        await svc.stop();
      }
    }
  }, 60_000);
});

/** Secrets never appear in logs or answers (found by the outside review's checklist). */
describe('secrets stay out of logs and answers (e2e)', () => {
  it('redacts NATS credentials in the URL, and never prints EPD_NATS_PASS or the admin token', async () => {
    const closed = await freePort(); // nobody listens: the service logs its retries
    const svc = await startServiceProcess(
      {
        EPD_NATS_URL: `nats://encoder:url-s3cret@127.0.0.1:${closed}`,
        EPD_NATS_PASS: 'env-s3cret',
        EPD_ADMIN_TOKEN: 'admin-s3cret-0123456789abcdef0123456789',
        EPD_LOG_LEVEL: 'info',
      },
      '/health',
    );
    try {
      expect(await waitFor(() => /NATS not reachable/.test(svc.output()), 10_000, 50)).toBe(true);
      const ready = await (await fetch(`${svc.url}/health/ready`)).text();
      const unauthorized = await (
        await fetch(`${svc.url}/admin/registry`, {
          headers: { Authorization: 'Bearer admin-s3cret-wrong' },
        })
      ).text();
      for (const text of [svc.output(), ready, unauthorized]) {
        expect(text).not.toMatch(/s3cret/);
      }
      expect(svc.output()).toContain('nats://***@127.0.0.1');
    } finally {
      await svc.stop();
    }
  }, 30_000);
});

/** The service at a terminal (a pty from util-linux `script`), as `npm start` runs it. */
describe('terminal output (e2e, built service under a pty)', () => {
  it('prints a banner with its URLs and readable log lines instead of JSON', async () => {
    const port = await freePort();
    const proc = spawn(
      'script',
      ['-qfec', `"${process.execPath}" ${SERVICE_NODE_FLAGS.join(' ')} dist/main.js`, '/dev/null'],
      {
        env: {
          ...process.env,
          EPD_NATS_URL: sharedNatsUrl(),
          EPD_SUBJECT_PREFIX: uniquePrefix(),
          EPD_HTTP_PORT: String(port),
          EPD_LOG_LEVEL: 'info',
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let out = '';
    // Without the colours: the assertions read the text.
    const ansi = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
    proc.stdout.on('data', (b: Buffer) => (out += b.toString().replace(ansi, '')));
    try {
      await waitFor(
        () => out.includes('epd-encoder ready'),
        30_000,
        10,
        () => `OUT>${out.slice(-3000)}`,
      );
      await waitFor(() => /Try\s/.test(out), 2000);
      expect(out).toMatch(new RegExp(`Dashboard\\s+http://127\\.0\\.0\\.1:${port}/admin/ui`));
      expect(out).toMatch(new RegExp(`Metrics\\s+http://127\\.0\\.0\\.1:${port}/metrics`));
      // pino-pretty's lines: a level word, not a JSON object. They come from the transport's
      // worker thread, so they may land after the banner (CI saw the banner alone at first).
      const pretty = /INFO.*serving NATS subjects/;
      expect(await waitFor(() => pretty.test(out), 10_000)).toBe(true);
      expect(out).not.toMatch(/^\{"level"/m);
    } finally {
      // Stop the service itself (script's child) by PID, then script.
      for (const pid of childPids(proc.pid!)) process.kill(pid, 'SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
  }, 60_000);
});
