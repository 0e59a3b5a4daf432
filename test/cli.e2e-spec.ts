import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { startTestApp, type TestApp } from './support/app';
import { waitFor } from './support/calls';
import { image } from './support/media';

/** The value of one series in Prometheus text (0 when absent). */
function metric(text: string, series: string): number {
  const escaped = series.replace(/[{}()[\].*+?^$|\\]/g, '\\$&');
  const m = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

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
        EPD_HTTP_PORT: new URL(t.httpUrl).port,
      };
      execFile(process.execPath, [EPD, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('load --concurrency for 5 s: its totals match the server’s counters', async () => {
    const scrape = async () => (await (await fetch(`${t.httpUrl}/metrics`)).text()).toString();
    const before = await scrape();
    const r = await epd(
      'load',
      '--concurrency',
      '2',
      '--duration',
      '5',
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
      latency_ms: { p50: number; p90: number; p99: number };
    };
    expect(report).toMatchObject({ mode: 'concurrency', errors: {} });
    expect(report.ok).toBeGreaterThan(4);
    expect(report.sent).toBe(report.ok);
    expect(report.throughput_per_s).toBeGreaterThan(0);
    expect(report.latency_ms.p99).toBeGreaterThanOrEqual(report.latency_ms.p90);
    expect(report.latency_ms.p90).toBeGreaterThanOrEqual(report.latency_ms.p50);
    const after = await scrape();
    const delta = (series: string) => metric(after, series) - metric(before, series);
    expect(delta('epd_encoder_requests_received_total{modality="image"}')).toBe(report.sent);
    expect(delta('epd_encoder_requests_total{modality="image",status="success",type="none"}')).toBe(
      report.ok,
    );
    expect(delta('epd_encoder_releases_total{reason="explicit"}')).toBe(report.ok);
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

  describe('encode, receive and status', () => {
    let dir: string;
    let file: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'epd-cli-'));
      file = join(dir, 'photo.png');
      writeFileSync(file, await image(112, 84, 'png'));
    });

    it('encode <file> --wait: the reply, when its metadata was answered, then released', async () => {
      const r = await epd('encode', file, '--wait', '--req-id', 'cli-enc-1');
      expect(r.status).toBe(0);
      const out = JSON.parse(r.stdout) as Record<string, unknown> & {
        timings: { total_ms: number };
      };
      expect(out).toMatchObject({
        req_id: 'cli-enc-1',
        embedding_len: 12,
        embedding_dim: 1024,
        released: true,
      });
      expect(out.metadata_after_ms).toBeGreaterThan(0);
      const admin = (await (await fetch(`${t.httpUrl}/admin/requests`)).json()) as {
        requests: unknown[];
      };
      expect(admin.requests).toHaveLength(0);
    });

    it('encode --send host:port delivers to `epd receive`, which prints the frame', async () => {
      const port = await new Promise<number>((resolve) => {
        const probe = ReferenceReceiver.start({ onFrame: () => undefined });
        void probe.then(async (rx) => {
          const p = rx.port;
          await rx.close();
          resolve(p);
        });
      });
      const receiver = spawn(process.execPath, [EPD, 'receive', '--port', String(port)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let lines = '';
      let errText = '';
      receiver.stdout.on('data', (b: Buffer) => (lines += b.toString()));
      receiver.stderr.on('data', (b: Buffer) => (errText += b.toString()));
      try {
        expect(await waitFor(() => errText.includes('listening on'), 10_000)).toBe(true);
        const r = await epd(
          'encode',
          file,
          '--send',
          `127.0.0.1:${port}`,
          '--req-id',
          'cli-send-1',
        );
        expect(r.status).toBe(0);
        const out = JSON.parse(r.stdout) as { embedding_size: number; sent: { bytes: number } };
        expect(out.sent.bytes).toBe(out.embedding_size);
        expect(await waitFor(() => lines.includes('cli-send-1'), 5000)).toBe(true);
        expect(JSON.parse(lines.trim().split('\n')[0]!)).toMatchObject({
          req_id: 'cli-send-1',
          shape: [12, 1024],
          bytes: out.embedding_size,
        });
      } finally {
        receiver.kill('SIGTERM');
      }
    });

    it('status prints the registry, staging, queue and rank tables (--json: the snapshot)', async () => {
      const r = await epd('status');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/^registry entries\s+\d+$/m);
      expect(r.stdout).toMatch(/^encodes ok \/ error \/ rejected\s+\d+ \/ \d+ \/ \d+$/m);
      expect(r.stdout).toMatch(/^dp_rank\s+active\s+staged\s+queue\s+encodes$/m);
      const json = await epd('status', '--json');
      const snapshot = JSON.parse(json.stdout) as { ranks: unknown[]; encode: { success: number } };
      expect(snapshot.ranks).toHaveLength(1);
      expect(snapshot.encode.success).toBeGreaterThan(0);
    });

    it('reports a bad configuration with exit 78, naming the variable', async () => {
      const r = await new Promise<{ status: number | null; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [EPD, 'status'],
          { env: { ...process.env, EPD_HTTP_PORT: 'eighty' } },
          (err, _stdout, stderr) =>
            resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
        ),
      );
      expect(r.status).toBe(78);
      expect(r.stderr).toMatch(/EPD_HTTP_PORT/);
    });
  });
});
