/**
 * vLLM's encode-instance face, in same-run ratios:
 *   1. request → file visible: the proxy's POST /v1/chat/completions (answered once
 *      <EPD_VLLM_EC_PATH>/<uuid>/encoder_cache.safetensors is in place), against the same
 *      encode over SGLang's route (/encode pushing to a TCP receiver, answered after its
 *      ack); distinct 448×448 images, blocks alternating, sequential;
 *   2. bytes/s written: the service's writer (EcStore.publish: a directory, a temporary
 *      file, one writev, a rename) against a raw writeFile of the same bytes to the same
 *      disk, 448×448-sized bf16 embeddings (256 × 1024).
 */
import { connect } from '@nats-io/transport-node';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from '../src/common/clock';
import { loadConfig } from '../src/config/config.loader';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { EcStore } from '../src/vllm/ec-store.service';
import { safetensorsHead } from '../src/vllm/safetensors';
import { NatsServer } from '../test/support/nats-server';
import {
  QUICK,
  machine,
  round,
  runBench,
  summarize,
  writeReport,
  distinctPng,
  httpJson,
} from './common';
import { startService } from './service-process';

const ROUNDS = QUICK ? 1 : 6;
const BLOCK = QUICK ? 4 : 15;
const WRITES = QUICK ? 30 : 300;
const ROWS = 256;
const WIDTH = 1024;

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

/** Part 2: the same bytes through the service's writer and through a raw writeFile. */
async function writeRates(dir: string): Promise<{ ours: number; raw: number }> {
  const { config } = loadConfig({
    EPD_VLLM_EC_PATH: join(dir, 'ours'),
    EPD_VLLM_MODEL_ID: 'bench',
    EPD_VLLM_EC_MAX_BYTES: String(64 * 2 ** 30),
  });
  const store = new EcStore(config, new Clock());
  await store.onModuleInit();
  const data = new Uint8Array(ROWS * WIDTH * 2).map((_, i) => i & 0xff);
  const head = safetensorsHead('ec_cache', 'bfloat16', [ROWS, WIDTH], data.byteLength);
  const whole = Buffer.concat([head, data]);
  const rawDir = join(dir, 'raw');
  const oursMs: number[] = [];
  const rawMs: number[] = [];
  // Alternating blocks of 10 so disk-cache state and noise fall on both alike.
  for (let i = 0; i < WRITES; i += 10) {
    let t0 = process.hrtime.bigint();
    for (let j = i; j < i + 10; j++) await store.publish(`k${j}`, 'bfloat16', [ROWS, WIDTH], data);
    oursMs.push(ms(t0));
    t0 = process.hrtime.bigint();
    for (let j = i; j < i + 10; j++) {
      const d = join(rawDir, `k${j}`);
      await import('node:fs/promises').then((fs) => fs.mkdir(d, { recursive: true }));
      await writeFile(join(d, 'encoder_cache.safetensors'), whole);
    }
    rawMs.push(ms(t0));
  }
  await store.onModuleDestroy();
  const bytes = 10 * whole.length;
  const rate = (xs: number[]) => bytes / (summarize(xs).p50 / 1000);
  return { ours: rate(oursMs), raw: rate(rawMs) };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'epd-bench-ec-'));
  const images = await Promise.all(
    Array.from({ length: 2 * ROUNDS * BLOCK + 6 }, (_, i) => distinctPng(i)),
  );
  const nats = await NatsServer.start();
  const svc = await startService({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'vec',
    EPD_STAGING_DTYPE: 'bfloat16',
    EPD_VLLM_EC_PATH: join(dir, 'ec'),
    EPD_VLLM_MODEL_ID: 'Qwen/Qwen2-VL-2B-Instruct',
  });
  const nc = await connect({ servers: nats.url });
  const rx = await ReferenceReceiver.start({ onFrame: () => undefined });
  let seq = 0;
  try {
    const vllm = async (item: string) => {
      const uuid = `bench-${seq++}`;
      const t0 = process.hrtime.bigint();
      await httpJson(`${svc.url}/v1/chat/completions`, {
        model: 'Qwen/Qwen2-VL-2B-Instruct',
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: item }, uuid }] },
        ],
        stream: false,
      });
      const took = ms(t0);
      if (!existsSync(join(dir, 'ec', uuid, 'encoder_cache.safetensors')))
        throw new Error(`${uuid}: answered before its file was visible`);
      return took;
    };
    const sglang = async (item: string) => {
      const reqId = `bench-sg-${seq++}`;
      const t0 = process.hrtime.bigint();
      await httpJson(`${svc.url}/encode`, {
        req_id: reqId,
        modality: 'image',
        num_parts: 1,
        part_idx: 0,
        mm_items: [item],
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
      });
      const took = ms(t0);
      nc.publish('vec.v1.release', JSON.stringify({ req_id: reqId }));
      return took;
    };
    for (let i = 0; i < 3; i++) {
      await vllm(images[i]!); // warm-up
      await sglang(images[3 + i]!);
    }
    const v: number[] = [];
    const s: number[] = [];
    let next = 6;
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < BLOCK; i++) v.push(await vllm(images[next++]!));
      for (let i = 0; i < BLOCK; i++) s.push(await sglang(images[next++]!));
    }
    const sv = summarize(v);
    const ss = summarize(s);
    const latencyRatio = sv.p50 / ss.p50;
    const rates = await writeRates(dir);
    const rateRatio = rates.ours / rates.raw;
    const mib = (x: number) => round(x / 2 ** 20, 1);

    writeReport({
      name: 'vllm-ec',
      quick: QUICK,
      machine: machine(),
      baseline:
        "the same encode over SGLang's route (/encode pushing to a TCP receiver), and a raw writeFile of the same bytes",
      results: {
        image: '448x448 PNG, distinct per request, bf16 staging',
        vllm: sv,
        sglang: ss,
        writes: {
          tensor: `${ROWS}x${WIDTH} bf16`,
          count: WRITES,
          oursBytesPerS: round(rates.ours),
          rawBytesPerS: round(rates.raw),
        },
      },
      targets: [
        {
          metric: 'request → file visible p50, vLLM face / SGLang route (448x448)',
          target: '≤ 1.25× (the file write costs less than a quarter of an encode)',
          value: round(latencyRatio, 3),
          pass: latencyRatio <= 1.25,
        },
        {
          metric: 'bytes/s written, EC writer (temporary name, writev, rename) / raw writeFile',
          target: '≥ 0.5× (atomic publication at most halves the write rate)',
          value: round(rateRatio, 3),
          pass: rateRatio >= 0.5,
        },
      ],
      table: [
        ['path', 'p50 ms (p99)', 'ratio'],
        ["SGLang route: /encode → TCP receiver's ack", `${round(ss.p50)} (${round(ss.p99)})`, '1'],
        [
          'vLLM face: /v1/chat/completions → file visible',
          `${round(sv.p50)} (${round(sv.p99)})`,
          String(round(latencyRatio, 3)),
        ],
        [],
        [`writes of ${ROWS}x${WIDTH} bf16`, 'MiB/s (p50 of blocks of 10)', 'ratio'],
        ['raw writeFile (mkdir + write)', String(mib(rates.raw)), '1'],
        [
          'EC writer (mkdir, temporary file, writev, rename)',
          String(mib(rates.ours)),
          String(round(rateRatio, 3)),
        ],
      ],
      notes: [
        'The vLLM face answers only after the rename, so its answer time bounds the time to the file being visible; the bench checks the file exists on every answer.',
        `EC path on ${tmpdir()} (the machine's temporary directory); a shared network volume adds its own latency to both writers.`,
      ],
    });
  } finally {
    await rx.close();
    await nc.close();
    await svc.stop();
    await nats.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

runBench(main);
