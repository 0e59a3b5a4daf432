/**
 * Event-loop lag of the service while it receives and parses large JSON bodies ("Hardening
 * first", defect 3, and "SGLang drop-in": SGLang's client sends photos inline as data
 * URIs, so bodies this large reach the JSON parser on the main thread). A prober sends
 * GET /health/live back to back; its latency while a POST is in flight is compared with
 * its latency on the idle service in the same run, in alternating blocks. Two photo sizes
 * (20 MB and a 7.7 MB 1600x1200 photo), each sent two ways:
 * - `parse`: parses and is refused by validation (400): receive + JSON.parse;
 * - `encode`: encoded (200): also base64 decoding and hashing on the main thread; decode
 *   and forward run on worker threads.
 */
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, percentile, round, runBench, writeReport } from './common';
import { startService } from './service-process';

const ROUNDS = QUICK ? 2 : 8;

async function probeWhile(url: string, work: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  let done = false;
  const prober = (async () => {
    while (!done) {
      const t0 = performance.now();
      await fetch(`${url}/health/live`).then((r) => r.arrayBuffer());
      samples.push(performance.now() - t0);
    }
  })();
  await work();
  done = true;
  await prober;
  return samples;
}

/** An incompressible photo (random pixels) of `width`×`height` as a PNG data URI. */
async function photoUri(width: number, height: number, compressionLevel: number): Promise<string> {
  const png = await sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
    .png({ compressionLevel })
    .toBuffer();
  return `data:image/png;base64,${png.toString('base64')}`;
}

async function main() {
  const nats = await NatsServer.start();
  const svc = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'bench' });
  try {
    // Two real-photo sizes: SGLang's client sends images inline, so these reach the parser.
    const sizes = {
      '20 MB': await photoUri(2600, 1900, 0),
      '7.7 MB': await photoUri(1600, 1200, 6),
    };
    const post = async (body: string, want: number) => {
      const r = await fetch(`${svc.url}/encode`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      await r.arrayBuffer();
      if (r.status !== want) throw new Error(`expected ${want}, got ${r.status}`);
    };
    type Kind = 'parse' | 'encode';
    const cases = Object.keys(sizes).flatMap((size) =>
      (['parse', 'encode'] as const).map((kind) => ({ size: size as keyof typeof sizes, kind })),
    );
    const idle: number[] = [];
    const during = new Map<string, number[]>();
    const wall = new Map<string, number[]>();
    const bodyBytes: Record<string, number> = {};
    for (let round_ = 0; round_ < ROUNDS; round_++) {
      idle.push(...(await probeWhile(svc.url, () => new Promise((r) => setTimeout(r, 300)))));
      for (const { size, kind } of cases) {
        const key = `${size} ${kind}`;
        const reqId = `e${round_}`;
        const body = JSON.stringify({
          req_id: reqId,
          modality: kind === 'parse' ? 'nope' : 'image',
          mm_items: [sizes[size]],
          num_parts: 1,
          part_idx: 0,
        });
        bodyBytes[size] = body.length;
        const t0 = performance.now();
        const samples = await probeWhile(svc.url, () => post(body, kind === 'parse' ? 400 : 200));
        during.set(key, [...(during.get(key) ?? []), ...samples]);
        wall.set(key, [...(wall.get(key) ?? []), performance.now() - t0]);
        if (kind === 'encode')
          await fetch(`${svc.url}/admin/requests/${reqId}/release`, { method: 'POST' });
      }
    }
    const stat = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return {
        n: s.length,
        p50: round(percentile(s, 50)),
        p99: round(percentile(s, 99)),
        max: round(s.at(-1) ?? NaN),
      };
    };
    const median = (xs: number[]) =>
      round([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
    const base = stat(idle);
    const label: Record<Kind, string> = {
      parse: 'body refused after parsing',
      encode: 'data-URI encode',
    };
    const rows = cases.map(({ size, kind }) => {
      const key = `${size} ${kind}`;
      return { key, size, kind, stat: stat(during.get(key)!), wallMs: median(wall.get(key)!) };
    });
    writeReport({
      name: 'http-body-lag',
      quick: QUICK,
      machine: machine(),
      baseline: 'GET /health/live latency on the idle service, same run, alternating blocks',
      results: {
        bodyBytes,
        idle: base,
        ...Object.fromEntries(rows.map((r) => [r.key, { ...r.stat, wallMs: r.wallMs }])),
      },
      targets: [],
      table: [
        ['probe latency (ms)', 'n', 'p50', 'p99', 'max', 'p99 / idle p99', 'POST wall ms'],
        [
          'idle service',
          String(base.n),
          String(base.p50),
          String(base.p99),
          String(base.max),
          '1',
          '-',
        ],
        ...rows.map((r) => [
          `during a ${r.size} ${label[r.kind]}`,
          String(r.stat.n),
          String(r.stat.p50),
          String(r.stat.p99),
          String(r.stat.max),
          String(round(r.stat.p99 / base.p99, 2)),
          String(r.wallMs),
        ]),
      ],
      notes: [
        `Bodies: ${Object.entries(bodyBytes)
          .map(([k, v]) => `${k} = ${(v / 2 ** 20).toFixed(1)} MiB of JSON`)
          .join(', ')} (incompressible PNGs of 2600x1900 and 1600x1200 as data URIs).`,
        'The max probe latency while the body is in flight bounds the longest event-loop stall it caused (JSON.parse, base64 decode and sha256 are synchronous on the main thread).',
      ],
    });
  } finally {
    await svc.stop();
    await nats.dispose();
  }
}

runBench(main);
