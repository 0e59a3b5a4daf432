import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import sharp from 'sharp';
import type { EncodeBody, EncodeResult, EncoderClient } from '../client/encoder-client';
import { MMError } from '../common/errors/mm-error';
import { MEDIA_TYPES } from './media-types';

export interface LoadOptions {
  /** Closed loop: this many requests in flight. */
  concurrency?: number;
  /** Open loop: this many requests started per second (in flight bounded by maxInFlight). */
  rate?: number;
  durationS: number;
  /** A directory of images, or undefined for generated ones. */
  imagesDir?: string;
  generated: number;
  /** Share of requests that reuse one of a few hot images (a cache's working set). */
  repeatRatio: number;
  timeoutMs: number;
  maxInFlight: number;
}

export interface LoadReport {
  mode: 'concurrency' | 'rate';
  target: number;
  duration_s: number;
  images: number;
  sent: number;
  ok: number;
  errors: Record<string, number>;
  throughput_per_s: number;
  latency_ms: { p50: number; p90: number; p99: number; max: number };
  /** Requests the open loop could not start because maxInFlight were pending. */
  skipped: number;
}

/** The image types `--images <dir>` takes, by extension. */
const imageType = (file: string): string | undefined => {
  const t = MEDIA_TYPES[extname(file).toLowerCase()];
  return t?.[1] === 'image' ? t[0] : undefined;
};

/** Data URIs of the images to send: a directory's (up to 1000), or `n` generated 448×448. */
export async function loadImages(dir: string | undefined, n: number): Promise<string[]> {
  if (dir) {
    const files = readdirSync(dir)
      .filter((f) => imageType(f) && statSync(join(dir, f)).isFile())
      .sort()
      .slice(0, 1000);
    if (files.length === 0) throw new Error(`no .png/.jpg/.webp/.gif images in ${dir}`);
    return files.map(
      (f) => `data:${imageType(f)};base64,${readFileSync(join(dir, f)).toString('base64')}`,
    );
  }
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const png = await sharp({
        create: {
          width: 448,
          height: 448,
          channels: 3,
          background: { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 },
        },
      })
        .png()
        .toBuffer();
      return `data:image/png;base64,${png.toString('base64')}`;
    }),
  );
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0
    ? 0
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/**
 * `epd load`: encodes (then releases) images through the NATS API for a duration, in a
 * closed loop (`concurrency`) or an open loop (`rate`), and reports latency percentiles,
 * throughput and errors by `type`. `onProgress` is called every 250 ms.
 */
export async function runLoad(
  client: Pick<EncoderClient, 'encode' | 'release'>,
  images: string[],
  options: LoadOptions,
  onProgress?: (p: { elapsedS: number; ok: number; failed: number; inFlight: number }) => void,
  random: () => number = Math.random,
): Promise<LoadReport> {
  const hot = images.slice(0, Math.max(1, Math.ceil(images.length / 10)));
  const pick = () =>
    random() < options.repeatRatio
      ? hot[Math.floor(random() * hot.length)]!
      : images[Math.floor(random() * images.length)]!;
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  let sent = 0;
  let inFlight = 0;
  let skipped = 0;
  const run = `load-${process.pid}-${Date.now().toString(36)}`;
  const started = performance.now();
  const until = started + options.durationS * 1000;

  const one = async (): Promise<void> => {
    const body: EncodeBody = { req_id: `${run}-${sent++}`, modality: 'image', mm_items: [pick()] };
    inFlight++;
    const t0 = performance.now();
    try {
      const r: EncodeResult = await client.encode(body, { timeoutMs: options.timeoutMs });
      latencies.push(performance.now() - t0);
      await client.release(r.req_id).catch(() => undefined);
    } catch (err) {
      const type = err instanceof MMError ? (err.type ?? String(err.code)) : 'client_error';
      errors[type] = (errors[type] ?? 0) + 1;
    } finally {
      inFlight--;
    }
  };

  const timer = onProgress
    ? setInterval(() => {
        const failed = Object.values(errors).reduce((a, b) => a + b, 0);
        onProgress({
          elapsedS: (performance.now() - started) / 1000,
          ok: latencies.length,
          failed,
          inFlight,
        });
      }, 250)
    : undefined;
  try {
    if (options.rate) {
      const pending = new Set<Promise<void>>();
      const interval = 1000 / options.rate;
      for (let next = started; next < until; next += interval) {
        const wait = next - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (inFlight >= options.maxInFlight) {
          skipped++;
          continue;
        }
        const p = one();
        pending.add(p);
        void p.finally(() => pending.delete(p));
      }
      await Promise.all(pending);
    } else {
      const worker = async () => {
        while (performance.now() < until) await one();
      };
      await Promise.all(Array.from({ length: options.concurrency ?? 1 }, worker));
    }
  } finally {
    clearInterval(timer);
  }
  const elapsedS = (performance.now() - started) / 1000;
  const sorted = latencies.sort((a, b) => a - b);
  const r2 = (x: number) => Math.round(x * 100) / 100;
  return {
    mode: options.rate ? 'rate' : 'concurrency',
    target: options.rate ?? options.concurrency ?? 1,
    duration_s: r2(elapsedS),
    images: images.length,
    sent,
    ok: latencies.length,
    errors,
    throughput_per_s: r2(latencies.length / elapsedS),
    latency_ms: {
      p50: r2(percentile(sorted, 50)),
      p90: r2(percentile(sorted, 90)),
      p99: r2(percentile(sorted, 99)),
      max: r2(sorted.at(-1) ?? 0),
    },
    skipped,
  };
}

/** The report as a small table for a terminal. */
export function formatReport(r: LoadReport): string {
  const rows: [string, string][] = [
    ['mode', `${r.mode} ${r.target}`],
    ['duration', `${r.duration_s} s`],
    ['images', String(r.images)],
    ['sent / ok', `${r.sent} / ${r.ok}`],
    ['throughput', `${r.throughput_per_s} /s`],
    [
      'latency p50 / p90 / p99',
      `${r.latency_ms.p50} / ${r.latency_ms.p90} / ${r.latency_ms.p99} ms`,
    ],
    ['latency max', `${r.latency_ms.max} ms`],
    ...Object.entries(r.errors).map(([type, n]): [string, string] => [
      `errors: ${type}`,
      String(n),
    ]),
    ...(r.skipped ? [['skipped (in-flight cap)', String(r.skipped)] as [string, string]] : []),
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** One line, redrawn in place: elapsed, done, failed, in flight, rate. */
export function progressLine(
  p: { elapsedS: number; ok: number; failed: number; inFlight: number },
  durationS: number,
): string {
  const width = 24;
  const filled = Math.min(width, Math.round((p.elapsedS / durationS) * width));
  const rate = p.elapsedS > 0 ? Math.round(p.ok / p.elapsedS) : 0;
  return `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${p.elapsedS.toFixed(1)}s  ok ${p.ok}  failed ${p.failed}  in flight ${p.inFlight}  ${rate}/s `;
}
