/**
 * The encode path in core-milliseconds per image (issue "Preprocessing fidelity and
 * encode-path speed"): CPU time, not wall time, so that a shared, noisy 2-core machine
 * still gives comparable figures. Every stage runs in interleaved blocks (stage A, B, …,
 * then again), and the table reports the median over blocks and the spread.
 *
 * Stages, measured with process.cpuUsage (all threads: ORT's included), with libvips on
 * one thread:
 *   decode (bytes → RGB), resize (to the smart-resize size, as the worker does it) and
 *   patchify (→ pixel_values), in a child process with a small heap (chain-cost.ts), as
 *   the service's preprocessing thread has; in this process: the bare ONNX forward (2
 *   intra-op threads, as the service), float16 and bfloat16 conversion of the output,
 *   and a TCP send to the reference receiver (sender and receiver both in this process).
 * Baselines in the same run:
 *   - a port of transformers' Qwen2VLImageProcessor slow path, read at commit cb0fc56f (test/interop/qwen2vl_reference.py, Pillow +
 *     numpy), decode plus processing, single core (its own process_time);
 *   - the service itself: its process CPU per encode over NATS, minus the bare chain's
 *     (decode, resize, patchify, forward, in a process of its own: chain-cost.ts), is the
 *     service's overhead;
 *   - a fused forward of 8 images against 8 separate forwards.
 */
import { execFileSync, fork, spawn } from 'node:child_process';
import { Clock } from '../src/common/clock';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { InferenceSession } from 'onnxruntime-node';
import sharp from 'sharp';
import { Float16Cast } from '../src/encoder/backend/float16-cast';
import { toBfloat16Array } from '../src/encoder/backend/half-precision';
import { modelInputs } from '../src/encoder/backend/model-inputs';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { TcpEmbeddingSender } from '../src/transfer/tcp-sender.service';
import { NatsServer } from '../test/support/nats-server';
import { stopProcess } from '../test/support/service-process';
import {
  machine,
  mainThreadMs,
  median,
  processOnCpuMs,
  QUICK,
  round,
  runBench,
  serviceGc,
  threadOnCpuMs,
  writeReport,
} from './common';
import { bareStages, benchSession } from './bare-stages';
import type { ChildAnswer, ChildStage } from './chain-cost';
import { startService } from './service-process';

sharp.concurrency(1);
const BLOCKS = QUICK ? 2 : 7;
const BATCH_BLOCKS = QUICK ? 2 : 21;
const PER_BLOCK = QUICK ? 2 : 6;
const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const dir = mkdtempSync(join(tmpdir(), 'epd-cost-'));

/** Core-ms of `fn` (process CPU, every thread). */
async function coreMs(fn: () => unknown): Promise<number> {
  const c0 = process.cpuUsage();
  await fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/** `pid`'s minor page faults so far, every thread (/proc/<pid>/stat, field 10). */
function minorFaults(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7]);
}

/** A thread's name (/proc comm), '' once it has exited. */
function threadName(pid: number, tid: number): string {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

const spread = (xs: number[]) => `${round(Math.min(...xs), 2)}–${round(Math.max(...xs), 2)}`;

/** A photo-like test image: smooth colour fields plus sensor noise. */
async function photo(w: number, h: number): Promise<Buffer> {
  const small = await sharp(randomBytes(Math.ceil(w / 16) * Math.ceil(h / 16) * 3), {
    raw: { width: Math.ceil(w / 16), height: Math.ceil(h / 16), channels: 3 },
  })
    .resize(w, h, { kernel: 'cubic' })
    .raw()
    .toBuffer();
  for (let i = 0; i < small.length; i += 7) small[i] = (small[i]! + (i % 13)) & 0xff;
  return sharp(small, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer();
}

interface StageRow {
  image: string;
  stage: string;
  blocks: number[];
}

async function imageStages(name: string, file: Buffer, session: InferenceSession, child: Child) {
  const { data, grid, forward } = await bareStages(file, session);
  const out = (await forward())[session.outputNames[0]!]!.data as Float32Array;
  const float16 = await Float16Cast.create();
  for (let k = 0; k < 40; k++) await float16.convert(out); // steady state, as below
  const receiver = await ReferenceReceiver.start({ onFrame: () => undefined });
  const sender = new TcpEmbeddingSender(new Clock());
  const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  const send = () =>
    sender.send(
      { host: '127.0.0.1', port: receiver.port },
      {
        req_id: 'cost',
        part_idx: 0,
        num_parts: 1,
        shape: [out.length / 1024, 1024],
        dtype: 'float32',
        byte_length: bytes.length,
        session_id: null,
        buffer_address: null,
      },
      bytes,
      Date.now() + 10_000,
    );
  // Preprocessing in the child (a small heap, as the service's preprocessing thread has),
  // which answers with its own core-ms; the rest in this process. Each gives core-ms.
  const inChild = (stage: ChildStage) => async () => (await child.call(stage)).ms;
  const here = (fn: () => unknown) => () => coreMs(fn);
  const stages: [string, () => Promise<number>][] = [
    ['decode', inChild('decode')],
    [`resize (${child.resizeKind})`, inChild('resize')],
    ['patchify', inChild('patchify')],
    ['forward (bare ORT)', here(forward)],
    ['float16 conversion (ORT Cast)', here(() => float16.convert(out))],
    ['bfloat16 conversion', here(() => toBfloat16Array(out))],
    ['send (TCP, with ack)', here(send)],
  ];
  const rows: StageRow[] = stages.map(([stage]) => ({ image: name, stage, blocks: [] }));
  for (let b = 0; b < BLOCKS; b++) {
    for (const [i, [, fn]] of stages.entries()) {
      let total = 0;
      for (let k = 0; k < PER_BLOCK; k++) total += await fn();
      rows[i]!.blocks.push(total / PER_BLOCK);
    }
  }
  await sender.onApplicationShutdown();
  await float16.release();
  await receiver.close();
  return { rows, tokens: (grid.h * grid.w) / 4, data, grid };
}

type Child = Awaited<ReturnType<typeof stagesProcess>>;

/**
 * The bare stages, chain and forward for `path`, in a child process of their own
 * (chain-cost.ts): each call answers with that process's core-ms.
 */
async function stagesProcess(path: string) {
  const child = fork(join(__dirname, 'chain-cost.js'), [path], { stdio: 'inherit' });
  let answer: ((value: unknown) => void) | undefined;
  child.on('message', (m) => answer?.(m));
  const next = () => new Promise((resolve) => (answer = resolve));
  const failed = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`chain-cost exited with ${code}`))),
  );
  failed.catch(() => undefined); // observed by the calls below
  const ready = (await Promise.race([next(), failed])) as { resizeKind: string };
  const call = async (stage: ChildStage) => {
    const got = next();
    child.send(stage);
    return (await Promise.race([got, failed])) as ChildAnswer;
  };
  return {
    resizeKind: ready.resizeKind,
    call,
    chain: () => call('chain'),
    forward: () => call('forward'),
    stop: () => {
      child.removeAllListeners('exit');
      child.kill();
    },
  };
}

/** The float16 conversion of a 999x1024 embedding, per block, core-ms (float16-cost.ts). */
function float16Blocks(): number[] {
  const out = execFileSync(process.execPath, [
    join(__dirname, 'float16-cost.js'),
    String(BLOCKS),
    String(PER_BLOCK * 5),
  ]).toString();
  return JSON.parse(out) as number[];
}

/** transformers' processor (Pillow + numpy) on the same file: decode + process, core-ms. */
function pythonReference(path: string): number[] {
  const script = `
import sys, time, numpy as np
sys.path.insert(0, 'test/interop')
from qwen2vl_reference import preprocess
blocks = []
for b in range(${BLOCKS}):
    t0 = time.process_time()
    for k in range(${PER_BLOCK}):
        preprocess(sys.argv[1], 3136, 1003520)
    blocks.append((time.process_time() - t0) * 1000 / ${PER_BLOCK})
print(' '.join(str(x) for x in blocks))
`;
  // One thread for numpy, like ours for libvips: single-core figures on both sides.
  const out = execFileSync(PYTHON, ['-c', script, path], {
    env: { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1' },
  }).toString();
  return out.trim().split(/\s+/).map(Number);
}

/**
 * A fresh service process spends its first encodes compiling its hot paths (V8 tiers up
 * on helper threads): measured 20 core-ms per 448² encode over the first 20, then 13-14.
 * So the service is warmed up first, and then measured in blocks, like the stages.
 */
const SERVICE_WARMUP = QUICK ? 8 : 50;
const SERVICE_PER_BLOCK = QUICK ? 3 : 12;

/** The encode request every measured process answers: one image, as a data URI. */
const encodeBody = (reqId: string, item: string) => ({
  req_id: reqId,
  modality: 'image',
  mm_items: [item],
  num_parts: 1,
  part_idx: 0,
});

/** Threads of a measured process by role, by operating-system id (none for a floor). */
type Roles = Record<'preprocessing' | 'inference' | 'libvips', number[]>;

/**
 * One call's cost in process `pid`: its CPU (every thread), its main thread's, each role's
 * threads', and its minor page faults.
 */
async function measureCall(
  pid: number,
  roles: Roles,
  call: () => Promise<void>,
): Promise<ThreadMs> {
  const cpu = (tids: number[]) => tids.reduce((ms, tid) => ms + threadOnCpuMs(pid, tid), 0);
  const c0 = processOnCpuMs(pid);
  const m0 = mainThreadMs(pid);
  const f0 = minorFaults(pid);
  const p0 = cpu(roles.preprocessing);
  const i0 = cpu(roles.inference);
  const v0 = cpu(roles.libvips);
  await call();
  return {
    total: processOnCpuMs(pid) - c0,
    main: mainThreadMs(pid) - m0,
    preprocessing: cpu(roles.preprocessing) - p0,
    inference: cpu(roles.inference) - i0,
    libvips: cpu(roles.libvips) - v0,
    faults: minorFaults(pid) - f0,
  };
}

/**
 * A service process encoding `file` over NATS, one encode at a time, each measured: the
 * process's CPU (every thread, schedstat, ns) and its main thread's.
 */
async function measuredService(file: Buffer, env: Record<string, string> = {}) {
  const nats = await NatsServer.start();
  const svc = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'cost', ...env });
  const pid = svc.proc.pid!;
  const nc = await connect({ servers: nats.url });
  const item = `data:image/jpeg;base64,${file.toString('base64')}`;
  let n = 0;
  const encode = async () => {
    const reqId = `c${n++}`;
    const reply = (
      await nc.request('cost.v1.encode', JSON.stringify(encodeBody(reqId, item)), {
        timeout: 60_000,
      })
    ).json<{ response?: unknown; err?: unknown }>();
    if (!reply.response) throw new Error(JSON.stringify(reply.err));
    nc.publish('cost.v1.release', JSON.stringify({ req_id: reqId }));
  };
  for (let i = 0; i < SERVICE_WARMUP; i++) await encode();
  const gc0 = (await serviceGc(svc.url)).major.count;
  // Its worker threads, by operating-system id (GET /admin/workers), for per-thread CPU.
  const { threads } = (
    (await (await fetch(`${svc.url}/admin/workers`)).json()) as {
      workers: { threads: { preprocessing: number[]; inference: number[] } }[];
    }
  ).workers[0]!;
  // libvips's own threads (decode), by name: its pool keeps them once started.
  const libvips = readdirSync(`/proc/${pid}/task`)
    .map(Number)
    .filter((tid) => threadName(pid, tid).startsWith('libvips'));
  const roles: Roles = { ...threads, libvips };
  let measured = 0;
  return {
    /** One encode's core-ms: the process, its main thread, preprocessing and inference threads. */
    async encode(): Promise<ThreadMs> {
      const ms = await measureCall(pid, roles, encode);
      measured++;
      return ms;
    },
    /** Stops it; returns its main thread's full collections per 100 measured encodes. */
    async stop(): Promise<number> {
      try {
        const gcs = (await serviceGc(svc.url)).major.count - gc0;
        return (100 * gcs) / Math.max(1, measured);
      } finally {
        await nc.drain();
        await svc.stop();
        await nats.dispose();
      }
    },
  };
}

/**
 * A floor for the service's own CPU (nats-floor.ts): a bare responder in a process of its
 * own that parses the same request and decodes its image, measured as the service is.
 * `nest` is a bare NestJS microservice, the shape the service is built in; its requests
 * carry Nest's envelope.
 */
async function floorProcess(mode: 'raw' | 'nest', file: Buffer) {
  const nats = await NatsServer.start();
  const subject = `floor.${mode}`;
  const proc = spawn(
    process.execPath,
    [join(__dirname, 'nats-floor.js'), mode, nats.url, subject],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
    proc.once('exit', (code) => reject(new Error(`nats-floor ${mode} exited with ${code}`)));
  });
  const pid = proc.pid!;
  const nc = await connect({ servers: nats.url });
  const item = `data:image/jpeg;base64,${file.toString('base64')}`;
  let n = 0;
  const call = async () => {
    const req = encodeBody(`f${n++}`, item);
    const body = mode === 'nest' ? { pattern: subject, data: req, id: req.req_id } : req;
    const reply = (await nc.request(subject, JSON.stringify(body), { timeout: 60_000 })).json<{
      response?: unknown;
    }>();
    if (!reply.response) throw new Error(`nats-floor ${mode}: ${JSON.stringify(reply)}`);
  };
  for (let i = 0; i < SERVICE_WARMUP; i++) await call();
  return {
    encode: (): Promise<ThreadMs> =>
      measureCall(pid, { preprocessing: [], inference: [], libvips: [] }, call),
    /** Stops it; it has no collections to report (0). */
    async stop(): Promise<number> {
      await nc.close();
      await stopProcess(proc);
      await nats.dispose();
      return 0;
    },
  };
}

/** A service's core-ms per encode (its process, and its threads by role), and its page faults. */
interface ThreadMs {
  total: number;
  main: number;
  preprocessing: number;
  /** The inference worker's own thread (ONNX Runtime's intra-op pool threads are not it). */
  inference: number;
  /** libvips's worker threads: the decode. */
  libvips: number;
  /** Minor page faults (fresh memory touched), every thread. */
  faults: number;
}

interface Round {
  /** Per encode, over the round: the bare chain, its forward, and each service's. */
  bare: number;
  /** The bare chain's minor page faults per encode (each service's are in `threads`). */
  bareFaults: number;
  forward: number;
  total: Record<string, number>;
  main: Record<string, number>;
  threads: Record<string, ThreadMs>;
}

/**
 * The service against the bare stages, alternated one encode at a time (the bare chain,
 * then an encode by each service, again and again) so that both see the same machine:
 * on this shared 2-core machine its speed drifts by 2× within minutes, and even blocks a
 * few seconds apart measured that drift (overheads of −2 to +13 ms per 1024×768 image
 * between two runs). Each round gives one figure per service.
 */
async function pairedRounds(
  bare: { chain: () => Promise<ChildAnswer>; forward: () => Promise<ChildAnswer> },
  services: Record<string, Awaited<ReturnType<typeof measuredService>>>,
): Promise<Round[]> {
  const rounds: Round[] = [];
  for (let b = 0; b < BLOCKS; b++) {
    const r: Round = { bare: 0, bareFaults: 0, forward: 0, total: {}, main: {}, threads: {} };
    for (let k = 0; k < SERVICE_PER_BLOCK; k++) {
      const chain = await bare.chain();
      r.bare += chain.ms;
      r.bareFaults += chain.faults;
      r.forward += (await bare.forward()).ms;
      for (const [name, svc] of Object.entries(services)) {
        const ms = await svc.encode();
        r.total[name] = (r.total[name] ?? 0) + ms.total;
        r.main[name] = (r.main[name] ?? 0) + ms.main;
        const sum = (r.threads[name] ??= {
          total: 0,
          main: 0,
          preprocessing: 0,
          inference: 0,
          libvips: 0,
          faults: 0,
        });
        for (const k of Object.keys(sum) as (keyof ThreadMs)[]) sum[k] += ms[k] / SERVICE_PER_BLOCK;
      }
    }
    r.bare /= SERVICE_PER_BLOCK;
    r.bareFaults /= SERVICE_PER_BLOCK;
    r.forward /= SERVICE_PER_BLOCK;
    for (const name of Object.keys(services)) {
      r.total[name]! /= SERVICE_PER_BLOCK;
      r.main[name]! /= SERVICE_PER_BLOCK;
    }
    rounds.push(r);
  }
  return rounds;
}

async function batchRatio(session: InferenceSession, data: Float32Array, grid: number[]) {
  const single = modelInputs(session, 'vision', data, [grid as [number, number, number]]);
  const eight = new Float32Array(data.length * 8);
  for (let i = 0; i < 8; i++) eight.set(data, i * data.length);
  const fused = modelInputs(
    session,
    'vision',
    eight,
    Array.from({ length: 8 }, () => grid as [number, number, number]),
  );
  // Paired blocks, in alternating order: this machine's speed drifts within a run, and a
  // ratio of medians taken over different moments measured that drift (0.94–1.14 between
  // runs); each block's own ratio does not.
  const separate: number[] = [];
  const together: number[] = [];
  const eightSeparate = () =>
    coreMs(async () => {
      for (let i = 0; i < 8; i++) await session.run(single);
    });
  const oneFused = () => coreMs(() => session.run(fused));
  for (let b = 0; b < BATCH_BLOCKS; b++) {
    if (b % 2 === 0) {
      separate.push(await eightSeparate());
      together.push(await oneFused());
    } else {
      together.push(await oneFused());
      separate.push(await eightSeparate());
    }
  }
  const ratios = separate.map((x, i) => x / together[i]!);
  return {
    separate: median(separate),
    fused: median(together),
    ratio: median(ratios),
    ratios: spread(ratios),
  };
}

async function main() {
  const session = await benchSession();
  const images = { '448x448': await photo(448, 448), '1024x768': await photo(1024, 768) };
  const rows: StageRow[] = [];
  const summary: Record<string, Record<string, number>> = {};
  let batch = { separate: 0, fused: 0, ratio: 0, ratios: '' };
  const serviceRows: string[][] = [];
  const pairedBlocks: Record<string, Round[]> = {};
  for (const [name, file] of Object.entries(images)) {
    const path = join(dir, `${name}.jpg`);
    writeFileSync(path, file);
    const bare = await stagesProcess(path);
    let r: Awaited<ReturnType<typeof imageStages>>;
    let rounds: Round[];
    let python: number[];
    const gcs: Record<string, number> = {};
    try {
      r = await imageStages(name, file, session, bare);
      python = pythonReference(path);
      // The service as configured, and without the staging slab, in the same rounds.
      // Started one after the other, so that no warm-up competes with another; a quick
      // run (a smoke test, measuring nothing) starts them together.
      const starts = [
        () => measuredService(file),
        () => measuredService(file, { EPD_STAGING_SLAB_BYTES: '0' }),
        () => floorProcess('raw', file),
        () => floorProcess('nest', file),
      ] as const;
      const [slab, noSlab, floorRaw, floorNest] = QUICK
        ? await Promise.all([starts[0](), starts[1](), starts[2](), starts[3]()])
        : [await starts[0](), await starts[1](), await starts[2](), await starts[3]()];
      const services = { slab, noSlab, floorRaw, floorNest };
      try {
        rounds = await pairedRounds(bare, services);
      } finally {
        for (const [k, svc] of Object.entries(services)) gcs[k] = await svc.stop();
      }
    } finally {
      bare.stop();
    }
    rows.push(...r.rows);
    const m = (stage: string) => median(r.rows.find((x) => x.stage.startsWith(stage))!.blocks);
    rows.push({ image: name, stage: 'reference: transformers processor (Python)', blocks: python });
    const preprocessing = m('decode') + m('resize') + m('patchify');
    pairedBlocks[name] = rounds;
    const figures = (svc: string) => ({
      total: median(rounds.map((x) => x.total[svc]!)),
      main: median(rounds.map((x) => x.main[svc]!)),
      overhead: median(rounds.map((x) => x.total[svc]! - x.bare)),
      share: median(rounds.map((x) => (x.total[svc]! - x.bare) / x.forward)),
      preprocessing: median(rounds.map((x) => x.threads[svc]!.preprocessing)),
      inference: median(rounds.map((x) => x.threads[svc]!.inference)),
      libvips: median(rounds.map((x) => x.threads[svc]!.libvips)),
      faults: median(rounds.map((x) => x.threads[svc]!.faults)),
      other: median(
        rounds.map((x) => {
          const t = x.threads[svc]!;
          return t.total - t.main - t.preprocessing - t.inference - t.libvips;
        }),
      ),
    });
    const on = figures('slab');
    const off = figures('noSlab');
    summary[name] = {
      tokens: r.tokens,
      preprocessing: round(preprocessing, 2),
      reference: round(median(python), 2),
      forward: round(m('forward'), 2),
      pairedBare: round(median(rounds.map((x) => x.bare)), 2),
      pairedForward: round(median(rounds.map((x) => x.forward)), 2),
      service: round(on.total, 2),
      serviceMain: round(on.main, 2),
      servicePreprocessing: round(on.preprocessing, 2),
      serviceInference: round(on.inference, 2),
      serviceLibvips: round(on.libvips, 2),
      serviceFaults: round(on.faults, 0),
      bareFaults: round(median(rounds.map((x) => x.bareFaults)), 0),
      serviceReferenceShare: round((on.preprocessing + on.libvips) / median(python), 2),
      serviceOther: round(on.other, 2),
      majorGcsPer100: round(gcs.slab!, 1),
      overhead: round(on.overhead, 2),
      overheadShare: round(100 * on.share, 1),
      noSlabService: round(off.total, 2),
      noSlabMain: round(off.main, 2),
      noSlabMajorGcsPer100: round(gcs.noSlab!, 1),
      noSlabOverhead: round(off.overhead, 2),
      noSlabOverheadShare: round(100 * off.share, 1),
      float16: round(m('float16'), 3),
      bfloat16: round(m('bfloat16'), 3),
      floorRaw: round(median(rounds.map((x) => x.total.floorRaw!)), 2),
      floorNest: round(median(rounds.map((x) => x.total.floorNest!)), 2),
      floorNestMain: round(median(rounds.map((x) => x.main.floorNest!)), 2),
      // What the service adds beyond the bare chain and the NestJS floor, per round.
      beyondFloor: round(median(rounds.map((x) => x.total.slab! - x.bare - x.total.floorNest!)), 2),
      beyondFloorShare: round(
        100 * median(rounds.map((x) => (x.total.slab! - x.bare - x.total.floorNest!) / x.forward)),
        1,
      ),
      floorNestShare: round(100 * median(rounds.map((x) => x.total.floorNest! / x.forward)), 1),
    };
    const s = summary[name];
    const overheads = (svc: string) => spread(rounds.map((x) => x.total[svc]! - x.bare));
    serviceRows.push(
      [
        name,
        `paired with the service: the bare chain in a process of its own (decode, resize, patchify, forward; forward alone ${s.pairedForward})`,
        String(s.pairedBare),
        spread(rounds.map((x) => x.bare)),
      ],
      [
        name,
        `service process per encode (tokens ${s.tokens}; overhead beyond the bare chain: ${s.overhead} ms (rounds ${overheads('slab')}), ${s.overheadShare}% of the forward; main thread ${s.serviceMain} ms, with ${s.majorGcsPer100} full collections per 100 encodes; the preprocessing thread ${s.servicePreprocessing} ms and libvips's decode threads ${s.serviceLibvips} ms (together ${s.serviceReferenceShare}× the Python reference's time), the inference thread ${s.serviceInference} ms, every other thread ${s.serviceOther} ms: ONNX Runtime's intra-op pool, V8's helpers, libuv; ${s.serviceFaults} page faults per encode, the bare chain ${s.bareFaults})`,
        String(s.service),
        spread(rounds.map((x) => x.total.slab!)),
      ],
      [
        name,
        `the same without the staging slab (EPD_STAGING_SLAB_BYTES=0; overhead ${s.noSlabOverhead} ms (rounds ${overheads('noSlab')}), ${s.noSlabOverheadShare}%; main thread ${s.noSlabMain} ms, with ${s.noSlabMajorGcsPer100} full collections per 100 encodes)`,
        String(s.noSlabService),
        spread(rounds.map((x) => x.total.noSlab!)),
      ],
      [
        name,
        'floor: a bare nats.js responder in a process of its own, answering the same request (JSON parse, base64 decode of the image, a small reply)',
        String(s.floorRaw),
        spread(rounds.map((x) => x.total.floorRaw!)),
      ],
      [
        name,
        `floor: a bare NestJS microservice (Nest's NATS transport, one @MessagePattern handler) doing the same: ${s.floorNestShare}% of the forward (main thread ${s.floorNestMain} ms); the service beyond the bare chain and this floor: ${s.beyondFloor} ms, ${s.beyondFloorShare}% of the forward`,
        String(s.floorNest),
        spread(rounds.map((x) => x.total.floorNest!)),
      ],
    );
    if (name === '448x448')
      batch = await batchRatio(session, r.data, [r.grid.t, r.grid.h, r.grid.w]);
  }
  // The 999x1024 conversion the issue names: its own figure, in a process of its own.
  const f16 = float16Blocks();
  await session.release();

  const t = (name: string) => summary[name]!;
  const batchFactor = round(batch.ratio, 2);
  writeReport({
    name: 'encode-cost',
    quick: QUICK,
    machine: machine(),
    baseline:
      "a port of transformers' Qwen2VLImageProcessor slow path (read at commit cb0fc56f) in Python (Pillow + numpy, one thread), the bare ORT forward, and 8 separate forwards, all in the same run",
    results: { summary, paired: pairedBlocks, batch, float16_999x1024: median(f16) },
    targets: [
      ...Object.keys(summary).map((name) => ({
        metric: `${name}: preprocessing / Python reference`,
        target: '≤ 0.5×',
        value: round(t(name).preprocessing! / t(name).reference!, 2),
        pass: t(name).preprocessing! / t(name).reference! <= 0.5,
      })),
      ...Object.keys(summary).map((name) => ({
        metric: `${name}: service overhead / forward (median over rounds of encodes alternated with the bare chain)`,
        target: '≤ 10%',
        value: t(name).overheadShare!,
        pass: t(name).overheadShare! <= 10,
      })),
      {
        metric: 'float16 conversion of 999x1024 (core-ms, ORT Cast, in a process of its own)',
        target: '≤ 1 ms',
        value: round(median(f16), 2),
        pass: median(f16) <= 1,
      },
      {
        metric:
          '8 separate forwards / 1 fused forward of 8 (CPU, median of paired blocks: no worse than separate)',
        target: '≥ 0.95×',
        value: batchFactor,
        pass: batchFactor >= 0.95,
      },
    ],
    table: [
      ['image', 'stage', 'core-ms (median)', 'spread over blocks'],
      ...rows.map((r) => [r.image, r.stage, String(round(median(r.blocks), 2)), spread(r.blocks)]),
      ...serviceRows,
    ],
    notes: [
      `${BLOCKS} interleaved blocks of ${PER_BLOCK} runs per stage; core-ms is process CPU (user + system, every thread) per image.`,
      'The 999x1024 float16 figure is measured in a child process of its own (float16-cost.ts), as the service converts in its inference thread, whose heap is small: inside this process each conversion also paid for collections of this large heap (the stage rows above include that).',
      "Decode, resize and patchify are measured in a child process of their own (chain-cost.ts), whose heap holds little, as the service's preprocessing thread's does. In this process (ONNX Runtime session, large heap) each fresh 18.8 MB patchify output at 1024x768 also paid 4–13 core-ms of page faults and collections, which neither the service nor the Python reference pays. Patchify there writes into one output kept across calls, as the service's preprocessing thread writes into the buffer the inference thread gave back after the previous forward (input-pool.ts; the service took 134 page faults per 448² encode before it, 71–90 after). The service row gives the same work measured inside the service (its preprocessing thread and libvips's threads) against the Python reference, as a cross-check.",
      `No accelerator here: the fused-batch goal that applies is "no worse than separate forwards" (≥ 0.95×); the ≥ 1.5× batching goal applies on a GPU. The figure is the median over ${BATCH_BLOCKS} paired blocks (8 separate 448² forwards and one fused forward of 8, in alternating order) of each block's ratio; blocks ranged ${batch.ratios}.`,
      'The service figure includes what the bare stages do not: NATS, JSON, the data-URI decode, the staging copy and the bookkeeping, and the V8 helper threads (garbage collection, compilation).',
      `Each service is measured after ${SERVICE_WARMUP} warm-up encodes, in ${BLOCKS} rounds of ${SERVICE_PER_BLOCK} encodes, alternated one at a time with the bare chain and the bare forward in a process of their own (chain-cost.ts; its CPU time of every thread; the service's CPU time of every thread from schedstat, at ns resolution; the main thread's full collections from the service's nodejs_gc_duration_seconds). The overhead is the service's CPU per encode minus the bare chain's, per round, and its share is of that round's forward: this machine's speed drifts by 2× within minutes, and figures taken even seconds apart measured the drift (−2 to +13 ms per 1024×768 image between two runs when the service ran in blocks after the stages). A fresh process costs more per encode while V8 compiles its hot paths: 20 core-ms per 448² encode over its first 20, measured.`,
      "Page faults per encode (minor faults, /proc/<pid>/stat; the bare chain's from its own getrusage) show memory the path touches fresh on every image instead of reusing: the preprocessing worker once made a Pillow resampler per resize, whose new WebAssembly memory cost 1,780 faults and ~10 core-ms per 1024x768 image; this figure is where such a regression shows first.",
      "The floors answer the same request as the service, in the same rounds, doing only what the wire format makes any NATS encoder do on its main thread: parse the JSON and decode the image's base64. The NestJS one is the shape the service is built in (its requests carry Nest's envelope). Its CPU per call, against the forward, is how much of the ≤ 10% goal the shape itself takes before the service does any work of its own; the service's figure beyond the bare chain and this floor is what its own code (validation, planning and admission, three thread hand-offs, staging, bookkeeping, metrics, tracing) adds.",
      'The staging slab (EPD_STAGING_SLAB_BYTES) keeps staged embeddings out of the main isolate: the inference thread writes them into one shared buffer, which V8 does not count as external memory of the main thread, so they no longer drive its collections. The second service row is the same service without it, measured in the same rounds.',
    ],
  });
}

runBench(main);
