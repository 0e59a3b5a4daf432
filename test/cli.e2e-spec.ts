import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { startTestApp, type TestApp } from './support/app';

const EPD = join(__dirname, '..', 'dist', 'cli', 'epd.js');

describe('the epd CLI (e2e, against the running app)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });

  afterAll(async () => {
    await t.close();
  });

  // Asynchronously: the app answering the CLI runs in this process.
  const epd = (...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const env = {
        ...process.env,
        EPD_NATS_URL: t.config.nats.url.join(','),
        EPD_SUBJECT_PREFIX: t.config.nats.subjectPrefix,
      };
      execFile(process.execPath, [EPD, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('load --concurrency encodes for the duration and reports percentiles, throughput and errors', async () => {
    const r = await epd(
      'load',
      '--concurrency',
      '2',
      '--duration',
      '2',
      '--generated',
      '4',
      '--json',
    );
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as {
      mode: string;
      ok: number;
      sent: number;
      errors: Record<string, number>;
      throughput_per_s: number;
      latency_ms: { p50: number; p99: number };
    };
    expect(report).toMatchObject({ mode: 'concurrency', errors: {} });
    expect(report.ok).toBeGreaterThan(4);
    expect(report.sent).toBe(report.ok);
    expect(report.throughput_per_s).toBeGreaterThan(0);
    expect(report.latency_ms.p99).toBeGreaterThanOrEqual(report.latency_ms.p50);
    // Everything it encoded, it released.
    const admin = (await (await fetch(`${t.httpUrl}/admin/requests`)).json()) as {
      requests: unknown[];
    };
    expect(admin.requests).toHaveLength(0);
  });

  it('load --rate starts requests at the rate, and prints a table without --json', async () => {
    const r = await epd('load', '--rate', '20', '--duration', '1', '--generated', '2');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^mode\s+rate 20$/m);
    expect(r.stdout).toMatch(/^sent \/ ok\s+(19|20|21) \/ (19|20|21)$/m);
    expect(r.stdout).toMatch(/^latency p50 \/ p90 \/ p99\s+[\d.]+ \/ [\d.]+ \/ [\d.]+ ms$/m);
  });

  it('refuses a load without exactly one of --concurrency and --rate (exit 2)', async () => {
    const r = await epd('load', '--duration', '1');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/load needs one of --concurrency C \(> 0\) or --rate R/);
  });
});
