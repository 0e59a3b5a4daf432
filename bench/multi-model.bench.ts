/**
 * What a second model costs a process (EPD_MODEL_DIR with two directories), in same-run
 * ratios: two services side by side, one with the Qwen2-VL-2B reference directory alone and
 * one with it and the Qwen3-VL-4B reference directory, both serving the default (Qwen2-VL)
 * model; rounds alternate between them, each a closed loop of CONCURRENCY encodes of
 * distinct 448×448 images over HTTP /encode.
 *   1. throughput with two models loaded / with one (the default model's encodes);
 *   2. resident memory after warm-up, each process (VmRSS): what the second model adds;
 *   3. the second model's own throughput in the two-model process, for the record.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NatsServer } from '../test/support/nats-server';
import {
  QUICK,
  distinctPng,
  httpJson,
  machine,
  median,
  round,
  runBench,
  writeReport,
} from './common';
import { ROOT, startService } from './service-process';

const ROUNDS = QUICK ? 1 : 7;
const PER_ROUND = QUICK ? 8 : 40;
const CONCURRENCY = 4;
const Q2 = join(ROOT, 'models', 'qwen2-vl-2b-reference');
const Q3 = join(ROOT, 'models', 'qwen3-vl-4b-reference');
const Q3_NAME = 'Qwen/Qwen3-VL-4B-Instruct';

/** Resident set size of `pid`, bytes. */
function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

async function main() {
  const images = await Promise.all(
    // Three warm-up rounds, two per measured round, and the second model's one.
    Array.from({ length: (3 + 2 * ROUNDS + 1) * PER_ROUND }, (_, i) => distinctPng(i)),
  );
  let next = 0;
  const nats = await NatsServer.start();
  const one = await startService({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'mm1',
    EPD_MODEL_DIR: Q2,
  });
  const two = await startService({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'mm2',
    EPD_MODEL_DIR: `${Q2},${Q3_NAME}=${Q3}`,
  });
  let seq = 0;
  try {
    /** PER_ROUND encodes, CONCURRENCY at a time: images per second. */
    const round_ = async (url: string, model?: string): Promise<number> => {
      const batch = images.slice(next, next + PER_ROUND);
      next += PER_ROUND;
      if (batch.length !== PER_ROUND) throw new Error('out of distinct images');
      const t0 = process.hrtime.bigint();
      let i = 0;
      const worker = async () => {
        for (let k = i++; k < batch.length; k = i++) {
          const reqId = `mm-${seq++}`;
          const res = await httpJson(`${url}/encode`, {
            req_id: reqId,
            modality: 'image',
            num_parts: 1,
            part_idx: 0,
            mm_items: [batch[k]!],
            ...(model ? { model } : {}),
          });
          // The model that answered: Qwen3-VL's rows are 10,240 wide, Qwen2-VL-2B's 1536.
          if (res.embedding_dim !== (model ? 10240 : 1536)) throw new Error(JSON.stringify(res));
          await httpJson(`${url}/admin/requests/${reqId}/release`, {});
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      return batch.length / (Number(process.hrtime.bigint() - t0) / 1e9);
    };
    // Warm-up: both processes, and the second model once.
    await round_(one.url);
    await round_(two.url);
    await round_(two.url, Q3_NAME);
    const rssOne = rssBytes(one.proc.pid!);
    const rssTwo = rssBytes(two.proc.pid!);
    const ratios: number[] = [];
    const oneRates: number[] = [];
    const twoRates: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternating which goes first, so drift falls on both alike.
      const [a, b] = r % 2 === 0 ? [one, two] : [two, one];
      const ra = await round_(a.url);
      const rb = await round_(b.url);
      const [r1, r2] = a === one ? [ra, rb] : [rb, ra];
      oneRates.push(r1);
      twoRates.push(r2);
      ratios.push(r2 / r1);
    }
    const q3Rate = await round_(two.url, Q3_NAME);
    const ratio = median(ratios);
    const mib = (x: number) => round(x / 2 ** 20, 1);
    const added = rssTwo - rssOne;
    writeReport({
      name: 'multi-model',
      quick: QUICK,
      machine: machine(),
      baseline:
        'the same service with one model (the Qwen2-VL-2B reference directory), in the same rounds',
      results: {
        image: '448x448 PNG, distinct per request, HTTP /encode, 4 concurrent',
        rounds: ROUNDS,
        perRound: PER_ROUND,
        oneModelImagesPerS: oneRates.map((x) => round(x, 1)),
        twoModelsImagesPerS: twoRates.map((x) => round(x, 1)),
        ratios: ratios.map((x) => round(x, 3)),
        secondModelImagesPerS: round(q3Rate, 1),
        rssOneModelBytes: rssOne,
        rssTwoModelsBytes: rssTwo,
        secondModelFileBytes: readFileSync(join(Q3, 'vision-encoder.onnx')).length,
      },
      targets: [
        {
          metric:
            "default model's throughput with a second model loaded / with one (median of rounds)",
          target: '≥ 0.9× (an idle second model costs its memory, not the first model its speed)',
          value: round(ratio, 3),
          pass: ratio >= 0.9,
        },
      ],
      table: [
        ['process', 'images/s (median of rounds)', 'VmRSS MiB after warm-up'],
        [
          'one model (Qwen2-VL-2B reference)',
          String(round(median(oneRates), 1)),
          String(mib(rssOne)),
        ],
        [
          'two models (+ Qwen3-VL-4B reference), default model',
          String(round(median(twoRates), 1)),
          String(mib(rssTwo)),
        ],
        ['two models, the second model by name (one round)', String(round(q3Rate, 1)), ''],
        [],
        ['what the second model adds', `throughput ratio ${round(ratio, 3)}`, `${mib(added)} MiB`],
      ],
      notes: [
        `The second model's tower file is ${mib(readFileSync(join(Q3, 'vision-encoder.onnx')).length)} MiB (the generated stand-in, not Qwen3-VL's real tower): memory a real tower adds is its ONNX weights and ORT's session on top, so measure it with scripts/device-check.sh where the tower is.`,
        'Both processes run on this 2-core machine at once, idle in turn: a round measures one while the other waits.',
        "Its embeddings are 10,240 wide (2560 × 4, DeepStack), so its images/s is not comparable with the first model's.",
      ],
    });
  } finally {
    await Promise.allSettled([one.stop(), two.stop()]);
    await nats.stop();
  }
}

runBench(main);
