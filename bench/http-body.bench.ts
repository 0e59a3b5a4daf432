/**
 * Event-loop lag of the service while it receives and parses a 20 MB JSON body ("Hardening
 * first", defect 3: EPD_HTTP_MAX_BODY_BYTES is now 64 MiB, so bodies this large reach the
 * JSON parser on the main thread). A prober sends GET /health/live back to back; its
 * latency while a 20 MB POST is in flight is compared with its latency on the idle
 * service in the same run, in alternating blocks. Two bodies:
 * - `parse`: 20 MB that parses and is refused by validation (400): receive + JSON.parse;
 * - `encode`: a 20 MB data URI of an incompressible photo, encoded (200): also base64
 *   decoding and hashing on the main thread; decode and forward run on worker threads.
 */
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, percentile, round, runBench, writeReport } from './common';
import { startService } from './service-process';

const ROUNDS = QUICK ? 3 : 8;

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

async function main() {
  const nats = await NatsServer.start();
  const svc = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'bench' });
  try {
    const photo = await sharp(randomBytes(2600 * 1900 * 3), {
      raw: { width: 2600, height: 1900, channels: 3 },
    })
      .png({ compressionLevel: 0 })
      .toBuffer();
    const uri = `data:image/png;base64,${photo.toString('base64')}`;
    const bodies = {
      parse: JSON.stringify({
        req_id: 'p',
        modality: 'nope',
        mm_items: [uri],
        num_parts: 1,
        part_idx: 0,
      }),
      encode: '',
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
    const idle: number[] = [];
    const during: Record<'parse' | 'encode', number[]> = { parse: [], encode: [] };
    const wall: Record<'parse' | 'encode', number[]> = { parse: [], encode: [] };
    for (let round_ = 0; round_ < ROUNDS; round_++) {
      idle.push(...(await probeWhile(svc.url, () => new Promise((r) => setTimeout(r, 300)))));
      for (const kind of ['parse', 'encode'] as const) {
        const reqId = `e${round_}`;
        const body =
          kind === 'parse'
            ? bodies.parse
            : JSON.stringify({
                req_id: reqId,
                modality: 'image',
                mm_items: [uri],
                num_parts: 1,
                part_idx: 0,
              });
        const t0 = performance.now();
        during[kind].push(
          ...(await probeWhile(svc.url, () => post(body, kind === 'parse' ? 400 : 200))),
        );
        wall[kind].push(performance.now() - t0);
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
    const base = stat(idle);
    const parse = stat(during.parse);
    const encode = stat(during.encode);
    const median = (xs: number[]) =>
      round([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
    writeReport({
      name: 'http-body-lag',
      quick: QUICK,
      machine: machine(),
      baseline: 'GET /health/live latency on the idle service, same run, alternating blocks',
      results: {
        bodyBytes: bodies.parse.length,
        idle: base,
        parse,
        encode,
        wallMs: { parse: median(wall.parse), encode: median(wall.encode) },
      },
      targets: [],
      table: [
        ['probe latency (ms)', 'n', 'p50', 'p99', 'max', 'p99 / idle p99'],
        ['idle service', String(base.n), String(base.p50), String(base.p99), String(base.max), '1'],
        [
          'during a 20 MB body refused after parsing',
          String(parse.n),
          String(parse.p50),
          String(parse.p99),
          String(parse.max),
          String(round(parse.p99 / base.p99, 2)),
        ],
        [
          'during a 20 MB data-URI encode',
          String(encode.n),
          String(encode.p50),
          String(encode.p99),
          String(encode.max),
          String(round(encode.p99 / base.p99, 2)),
        ],
      ],
      notes: [
        `Body: ${(bodies.parse.length / 2 ** 20).toFixed(1)} MiB of JSON (a 2600x1900 incompressible PNG as a data URI). Median wall time of the POST: parse ${median(wall.parse)} ms, encode ${median(wall.encode)} ms.`,
        'The max probe latency while the body is in flight bounds the longest event-loop stall it caused (JSON.parse, base64 decode and sha256 are synchronous on the main thread).',
      ],
    });
  } finally {
    await svc.stop();
    await nats.dispose();
  }
}

runBench(main);
