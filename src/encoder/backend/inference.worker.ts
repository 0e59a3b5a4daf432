import { InferenceSession, Tensor } from 'onnxruntime-node';
import Piscina from 'piscina';
import { reclaimAfter } from '../workers/reclaim';
import { Errors } from '../../common/errors/error-catalogue';
import { moveOut } from '../workers/move-out';
import { pack } from '../workers/pack';
import { discard, giveBack, unpack } from '../workers/parcel';
import { Float16Cast } from './float16-cast';
import { toBfloat16Array } from './half-precision';
import { CONTRACT_ERROR_PREFIX, checkModelContract } from './model-contract-check';
import { audioRows, melBins, modelInputs } from './model-inputs';
import type {
  ForwardOutput,
  ForwardPart,
  ForwardReply,
  ForwardResult,
  ForwardTask,
  InferenceWorkerData,
  ModelInfo,
  StagingDtype,
} from './forward.types';
import { AUDIO_MEL_FRAMES, DEFAULT_N_MELS } from '../pipeline/model-contract';
import { announceLoaded } from '../workers/close-pool';

// Runs in the single inference worker thread. ONNX Runtime's run() blocks its calling
// thread for the whole forward; here that is this worker, never the main event loop.
const data = Piscina.workerData as InferenceWorkerData;

let sessions:
  | Promise<{
      /** Every vision model's session, by name; the default's is `vision`. */
      visions: Map<string, InferenceSession>;
      vision: InferenceSession;
      audio?: InferenceSession;
      info: ModelInfo;
    }>
  | undefined;

async function open(path: string): Promise<InferenceSession> {
  return InferenceSession.create(path, {
    intraOpNumThreads: data.intraOpThreads,
    interOpNumThreads: 1,
    executionProviders: data.executionProviders,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // ORT's CPU arena keeps the peak activations of the largest forward for the life of
    // the session: 350+ MB after one 15k-token request, never returned. Without it a
    // 448² forward costs the same here (3.8 vs 3.9 ms; 8 fused 31.3 vs 31.0 ms), and the
    // memory goes back after release. Shapes vary per request, so memory patterns do not
    // apply either.
    enableCpuMemArena: false,
    enableMemPattern: false,
    // ORT's pool busy-spins between work items by default, burning the cores that the
    // preprocessing threads share with it (measured: fused forwards ~2x slower per image).
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  });
}

/**
 * The output width (the last axis: [tokens, dim] for vision, [windows, 750, dim] for
 * audio), from the model's declared shape or, if symbolic, from a probe forward.
 */
async function outputDim(
  session: InferenceSession,
  probe: Record<string, Tensor>,
): Promise<number> {
  const meta = session.outputMetadata[0];
  const declared = meta && 'shape' in meta ? meta.shape.at(-1) : undefined;
  if (typeof declared === 'number' && declared > 0) return declared;
  const out = await session.run(probe);
  const dims = out[session.outputNames[0]!]!.dims;
  return Number(dims.at(-1));
}

function load() {
  sessions ??= (async () => {
    const audioPath = data.audioPath;
    const [opened, audio] = await Promise.all([
      Promise.all(data.visionModels.map((m) => open(m.path))),
      audioPath ? open(audioPath) : undefined,
    ]);
    const visions = new Map<string, InferenceSession>();
    const visionModels: ModelInfo['visionModels'] = {};
    for (const [i, m] of data.visionModels.entries()) {
      const session = opened[i]!;
      checkModelContract(
        'vision',
        m.path,
        session.inputMetadata,
        session.outputMetadata,
        m.patchDim,
        m.tile ? { tile: m.tile, tokensPerTile: m.tokensPerTile! } : undefined,
      );
      // A probe of the smallest input: one merge group of patches, or one tile (a tiled
      // feed reads only each grid's tile count).
      const probe = m.tile
        ? modelInputs(session, 'vision', new Float32Array(m.patchDim), [[1, 1, 1]], 0, m.tile)
        : modelInputs(session, 'vision', new Float32Array(4 * m.patchDim), [[1, 2, 2]]);
      const dim = await outputDim(session, probe);
      if (m.expected && dim !== m.expected.width)
        throw new Error(
          `${CONTRACT_ERROR_PREFIX}: vision model ${m.path} outputs width ${dim}, but ${m.expected.from} declares ${m.expected.width} (the embedding width its language model takes)`,
        );
      visions.set(m.name, session);
      visionModels[m.name] = { dim, path: m.path };
    }
    if (audio && audioPath)
      checkModelContract('audio', audioPath, audio.inputMetadata, audio.outputMetadata, 0);
    const vision = opened[0]!;
    const visionDim = visionModels[data.visionModels[0]!.name]!.dim;
    // No audio model (a model directory without one): audioDim 0 says so to the pipeline.
    const audioMels = audio ? melBins(audio, DEFAULT_N_MELS) : DEFAULT_N_MELS;
    const audioDim = audio
      ? await outputDim(
          audio,
          modelInputs(
            audio,
            'audio',
            new Float32Array(audioMels * AUDIO_MEL_FRAMES),
            [],
            audioMels,
          ),
        )
      : 0;
    return {
      visions,
      vision,
      audio,
      info: {
        visionDim,
        visionModels,
        audioDim,
        audioMels,
        visionPath: data.visionPath,
        audioPath: audioPath ?? '',
      },
    };
  })();
  return sessions;
}

/**
 * Fused inputs are packed into one grow-only scratch buffer that lives as long as this
 * worker: fresh large allocations are slow here (profiled: a new buffer per fused batch
 * cost ~30% of the forward itself). Safe because one forward runs at a time and ORT reads
 * the input only during run().
 */
let scratch = new Float32Array(0);

let float16: Promise<Float16Cast> | undefined;

/** The staging dtype's values of float32 ones (bfloat16 and float16 round to nearest even). */
async function stage(
  dtype: StagingDtype,
  values: Float32Array,
): Promise<Float32Array | Uint16Array> {
  if (dtype === 'float32') return values;
  if (dtype === 'bfloat16') return toBfloat16Array(values);
  float16 ??= Float16Cast.create();
  return (await float16).convert(values);
}

/** The scratch buffer, grown to at least `length` values. */
function scratchOf(length: number): Float32Array {
  if (scratch.length < length) scratch = new Float32Array(length);
  return scratch;
}

export async function info(): Promise<ModelInfo> {
  return (await load()).info;
}

/**
 * Vision output [tokens, dim]: each request's rows, in order, in the staging dtype. The
 * whole output is converted once; a lone request keeps it as it is (no copy: the output
 * is a fresh buffer ORT made for this run), a fused batch gets a copy per request, so that
 * each staged embedding owns its memory.
 */
async function visionOutputs(task: ForwardTask, dims: readonly number[], values: Float32Array) {
  // [tokens, dim], or a tiling family's [tiles, tokens per tile, dim]: the same rows in order.
  const rows = dims.length === 3 ? Number(dims[0]) * Number(dims[1]) : Number(dims[0]);
  const dim = Number(dims.at(-1));
  const expected = task.parts.reduce((n, p) => n + p.tokens, 0);
  if (dims.length < 2 || dims.length > 3 || rows !== expected)
    throw Errors.tokenMismatch(rows, expected);
  const staged = await stage(task.dtype, values);
  const whole = staged.byteOffset === 0 && staged.byteLength === staged.buffer.byteLength;
  const lone = task.parts[0]!;
  if (task.parts.length === 1 && whole && lone.slabOffset === undefined)
    return [{ data: staged, tokens: lone.tokens }];
  let offset = 0;
  return task.parts.map((p) => {
    const rows = staged.subarray(offset * dim, (offset + p.tokens) * dim);
    offset += p.tokens;
    return output(p, rows);
  });
}

/**
 * A part's output: written into its slab slot when it has one (the reply then carries no
 * buffer), else a copy of its own, so that each staged embedding owns its memory.
 */
function output(part: ForwardPart, rows: Float32Array | Uint16Array): ForwardOutput {
  if (part.slabOffset === undefined || !data.slab)
    return { data: rows.slice(), tokens: part.tokens };
  if (rows instanceof Float32Array) {
    new Float32Array(data.slab, part.slabOffset, rows.length).set(rows);
    return { data: new Float32Array(0), tokens: part.tokens, inSlab: true };
  }
  new Uint16Array(data.slab, part.slabOffset, rows.length).set(rows);
  return { data: new Uint16Array(0), tokens: part.tokens, inSlab: true };
}

/**
 * Audio output [windows, 750, dim]: per request, the real rows of each of its windows
 * (the first `windowTokens[w]`; the rest cover the window's zero padding).
 */
async function audioOutputs(task: ForwardTask, dims: readonly number[], values: Float32Array) {
  const windows = Number(dims[0]);
  const expected = task.parts.reduce((n, p) => n + p.windowTokens.length, 0);
  if (dims.length !== 3 || windows !== expected) throw Errors.tokenMismatch(windows, expected);
  let first = 0;
  const outputs = [];
  for (const p of task.parts) {
    const rows = audioRows(values, dims, p.windowTokens, first);
    first += p.windowTokens.length;
    const staged = await stage(task.dtype, rows);
    outputs.push(
      p.slabOffset === undefined ? { data: staged, tokens: p.tokens } : output(p, staged),
    );
  }
  return outputs;
}

/**
 * A tiling model's tile side (its input is [tiles, 3, tile, tile]); 0 for patch rows. Read
 * per forward, not when this module loads: a thread may be started and closed before it has
 * any model (the pool-churn probe), and module code must not throw then.
 */
function tileOf(model: string | undefined): number {
  const m = model ? data.visionModels.find((v) => v.name === model) : data.visionModels[0];
  return m?.tile ?? 0;
}

/** One packed forward for every part (a fused batch), split back per request. */
async function run(task: ForwardTask, inputs: Float32Array[]): Promise<ForwardResult> {
  const { visions, vision, audio, info: models } = await load();
  const session = task.kind === 'vision' ? (task.model ? visions.get(task.model) : vision) : audio;
  if (!session)
    throw new Error(
      task.kind === 'vision'
        ? `no vision model ${task.model} is loaded`
        : 'no audio model is loaded',
    );
  const input = pack(inputs, scratchOf);
  const feeds = modelInputs(
    session,
    task.kind,
    input,
    task.parts.flatMap((p) => p.grids),
    models.audioMels,
    task.kind === 'vision' ? tileOf(task.model) : 0,
  );
  const started = performance.now();
  const out = await session.run(feeds);
  const forwardMs = performance.now() - started;
  const tensor = out[session.outputNames[0]!]!;
  const values = tensor.data as Float32Array;
  const outputs =
    task.kind === 'vision'
      ? await visionOutputs(task, tensor.dims, values)
      : await audioOutputs(task, tensor.dims, values);
  reclaimAfter(input.byteLength + values.byteLength);
  return { outputs, dim: Number(tensor.dims.at(-1)), forwardMs };
}

/**
 * A fused forward that fails hands every input back, so that each request can be retried
 * alone: the main thread has no copy (it transferred them here). A lone request's failure
 * is thrown as it is.
 */
export async function forward(task: ForwardTask): Promise<ForwardReply> {
  let inputs: Float32Array[];
  let result: ForwardResult;
  try {
    inputs = task.parts.map((p) => unpack(p.data));
  } catch (err) {
    for (const p of task.parts) discard(p.data); // every port closed, even if one was empty
    throw err;
  }
  try {
    result = await run(task, inputs);
  } catch (err) {
    for (const p of task.parts) discard(p.data);
    if (inputs.length === 1) throw err;
    const { message, code } = err as { message?: string; code?: unknown };
    const failed: ForwardReply = {
      ok: false,
      message: message ?? String(err),
      ...(typeof code === 'number' ? { code } : {}),
      inputs,
    };
    return moveOut(
      failed,
      inputs.map((i) => i.buffer),
    );
  }
  // Read: each image's buffer goes back to its preprocessing thread, for a later image's
  // values (audio features are not made in reused buffers: theirs are freed here).
  task.parts.forEach((p, i) =>
    task.kind === 'vision' ? giveBack(p.data, inputs[i]!) : discard(p.data),
  );
  return moveOut(
    { ok: true, ...result },
    result.outputs.filter((o) => !o.inSlab).map((o) => o.data.buffer),
  );
}

// Every import above is loaded: this thread may now be terminated safely.
announceLoaded();
