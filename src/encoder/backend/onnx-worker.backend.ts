import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { isAbsolute, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import Piscina from 'piscina';
import { AppConfig } from '../../config/app-config';
import { closePool, createPool, poolThreadIds, runTask } from '../workers/close-pool';
import { workerFile } from '../workers/worker-file';
import { EncoderBackend } from './encoder-backend';
import type {
  ForwardReply,
  ForwardResult,
  ForwardTask,
  InferenceWorkerData,
  ModelInfo,
} from './forward.types';
import { projectRoot } from '../../common/fs/project-root';
import { referenceModelPaths } from '../../config/model-paths';
import { servedModel, StartRefusedError, type ServedModel } from './model-marker';
import { checkExecutionProviders } from './execution-providers';
import { NO_AUDIO_MODEL, readModelDirs, visionModelsOf } from '../../config/model-dir';
import { patchDim, tokensPerTile } from '../../common/vision-geometry';
import { discard, handOn, isParcel } from '../workers/parcel';
import { DTYPE_BYTES } from '../../transfer/frame';
import { type SlabSlot, StagingSlab } from './staging-slab';

function modelPath(configured: string, fallback: string, key: string): string {
  const path = configured
    ? isAbsolute(configured)
      ? configured
      : resolve(projectRoot(), configured)
    : fallback;
  if (!existsSync(path)) {
    throw new Error(
      `${key}: model file ${path} does not exist${configured ? '' : ' (run "npm run models" to generate the reference models)'}`,
    );
  }
  return path;
}

/**
 * A generated reference model (random weights) is served only with
 * EPD_ALLOW_REFERENCE_MODEL=true: without it the start stops here, naming the file, so a
 * deployment never serves meaningless embeddings by accident. Allowed, it is said loudly.
 */
function refuseUnallowedStandIns(models: ServedModel[], allowed: boolean, logger: Logger): void {
  const standIns = models.filter((m) => m.reference);
  if (standIns.length === 0) return;
  const list = standIns.map((m) => `${m.kind} ${m.path}`).join(', ');
  if (!allowed)
    throw new StartRefusedError(
      `refusing to serve a generated reference model (random weights; its embeddings are meaningless): ${list}. ` +
        'Set EPD_MODEL_PATH / EPD_AUDIO_MODEL_PATH to a real tower (docs/models.md), or EPD_ALLOW_REFERENCE_MODEL=true for a demo or a test.',
    );
  logger.warn(
    { models: standIns.map((m) => m.path) },
    'serving a generated REFERENCE model (random weights): embeddings are meaningless (EPD_ALLOW_REFERENCE_MODEL=true)',
  );
}

/**
 * ONNX Runtime in one dedicated worker thread: sessions are created once per process, a
 * forward never blocks the main event loop, and tensors cross the thread boundary by
 * transfer. One thread, because the scheduler runs one (fused) forward at a time and ORT
 * parallelises inside it with EPD_INTRA_OP_THREADS.
 */
@Injectable()
export class OnnxWorkerBackend extends EncoderBackend implements OnModuleDestroy {
  private readonly logger = new Logger('OnnxBackend');
  private readonly pool: Piscina;
  private infoPromise?: Promise<ModelInfo>;
  /** Where staged embeddings are written (EPD_STAGING_SLAB_BYTES); see `slabFor`. */
  readonly slab?: StagingSlab;
  private readonly served: ServedModel[];

  constructor(private readonly config: AppConfig) {
    super();
    const defaults = referenceModelPaths();
    const workerData: InferenceWorkerData = {
      visionPath: modelPath(
        config.encoder.modelPath,
        defaults.vision,
        'encoder.modelPath (EPD_MODEL_PATH)',
      ),
      // `none`: no audio model (a model directory without one sets it).
      ...(config.encoder.audioModelPath === NO_AUDIO_MODEL
        ? {}
        : {
            audioPath: modelPath(
              config.encoder.audioModelPath,
              defaults.audio,
              'encoder.audioModelPath (EPD_AUDIO_MODEL_PATH)',
            ),
          }),
      intraOpThreads: config.encoder.intraOpThreads,
      visionModels: [],
      executionProviders: checkExecutionProviders(config.encoder.ortExecutionProviders),
    };
    // Model directories (EPD_MODEL_DIR) name each model and its family, and declare the
    // width its tower must output (checked when it loads); the first is the default.
    const specs = visionModelsOf(config.encoder);
    workerData.visionModels = specs.map((m) => ({
      name: m.name,
      path: m.path,
      patchDim: patchDim(m.geometry),
      ...(m.geometry.tiling
        ? { tile: m.geometry.tiling.size, tokensPerTile: tokensPerTile(m.geometry) }
        : {}),
      ...(m.width !== undefined ? { expected: { width: m.width, from: m.widthFrom! } } : {}),
    }));
    const dir = config.encoder.modelDir
      ? readModelDirs(config.encoder.modelDir, projectRoot())[0]
      : undefined;
    this.served = specs.map((m) =>
      servedModel('vision', m.path, config.encoder.modelDir ? m : undefined),
    );
    if (workerData.audioPath)
      this.served.push(
        servedModel(
          'audio',
          workerData.audioPath,
          dir?.audioPath ? { name: dir.name, family: 'qwen2-audio' } : undefined,
        ),
      );
    refuseUnallowedStandIns(this.served, config.encoder.allowReferenceModel, this.logger);
    this.slab = slabFor(config);
    if (this.slab) workerData.slab = this.slab.buffer;
    this.pool = createPool({
      filename: workerFile(__dirname, 'inference.worker'),
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Infinity,
      // 'sync' parks an idle worker in Atomics.wait right after its reply, so nothing on its
      // event loop (reclaimAfter's collection) runs until the next task arrives: the last
      // request's buffers stayed resident meanwhile. 'async' keeps the fast wake-up.
      atomics: 'async',
      workerData,
    });
  }

  override get models(): readonly ServedModel[] {
    return this.served;
  }

  override get threadIds(): number[] {
    return poolThreadIds(this.pool);
  }

  override get stagingSlab() {
    return this.slab?.usage;
  }

  info(): Promise<ModelInfo> {
    this.infoPromise ??= runTask<ModelInfo>(this.pool, null, { name: 'info' }).then((info) => {
      this.logger.log(
        {
          ...info,
          models: this.served.map(
            (m) => `${m.kind}: ${m.name} (${m.family}${m.reference ? ', reference' : ''})`,
          ),
          executionProviders: this.config.encoder.ortExecutionProviders,
          modelDir: this.config.encoder.modelDir,
          minPixels: this.config.encoder.minPixels,
          maxPixels: this.config.encoder.maxPixels,
        },
        'models loaded',
      );
      return info;
    });
    return this.infoPromise;
  }

  async forward(task: ForwardTask): Promise<ForwardResult> {
    // piscina never settles a task whose transfer list holds a detached buffer (or a port
    // already moved): refuse it. A detached array reads as empty; its part still has rows.
    if (
      task.parts.some((p) => (isParcel(p.data) ? p.data.taken : p.rows > 0 && p.data.length === 0))
    )
      throw new Error('model input already handed to the inference thread (detached)');
    let slots: (SlabSlot | undefined)[] = [];
    let reply: ForwardReply;
    try {
      slots = await this.slots(task);
      const transferList = task.parts.map((p) =>
        isParcel(p.data) ? handOn(p.data) : (p.data.buffer as ArrayBuffer),
      );
      reply = await runTask<ForwardReply>(this.pool, task, { name: 'forward', transferList });
    } catch (err) {
      // Not sent (the pool refused the task) or lost with its thread: a parcel still
      // here is freed now (closing one already moved is harmless).
      for (const p of task.parts) discard(p.data);
      for (const s of slots) s?.drop();
      throw err;
    }
    task.parts.forEach((p) => delete p.slabOffset);
    if (reply.ok) {
      reply.outputs.forEach((o, i) => {
        const slot = slots[i];
        if (o.inSlab && slot) {
          o.data = slot.view(task.dtype);
          o.slot = slot;
        } else slot?.drop();
      });
      return reply;
    }
    for (const s of slots) s?.drop();
    // A fused forward failed: the parts get their inputs back for the retry one by one.
    task.parts.forEach((p, i) => (p.data = reply.inputs[i]!));
    throw Object.assign(
      new Error(reply.message),
      reply.code === undefined ? {} : { code: reply.code },
    );
  }

  /**
   * A slab slot for each part's output, where one is free (each part without one gets an
   * ordinary buffer back); its offset goes to the inference thread with the task.
   */
  private async slots(task: ForwardTask): Promise<(SlabSlot | undefined)[]> {
    if (!this.slab) return [];
    const info = await this.info();
    const dim = task.kind === 'vision' ? info.visionDim : info.audioDim;
    return task.parts.map((p) => {
      const slot = this.slab!.alloc(p.tokens * dim * DTYPE_BYTES[task.dtype]);
      if (slot) p.slabOffset = slot.offset;
      return slot;
    });
  }

  async onModuleDestroy(): Promise<void> {
    await closePool(this.pool, this.config.shutdown.graceMs);
    this.slab?.close();
  }
}

/**
 * The staging slab, unless EPD_STAGING_SLAB_BYTES is 0 or an embedding may outlive its
 * request's state: with the embedding cache on (a cached entry shares the staged values),
 * or the ZMQ data plane (zeromq.js may still read a payload after its send resolved). Those
 * stage ordinary buffers, as every embedding the slab has no room for does.
 */
function slabFor(config: AppConfig): StagingSlab | undefined {
  const bytes = config.encoder.stagingSlabBytes;
  if (bytes <= 0 || config.cache.maxBytes > 0 || config.transfer.backend === 'zmq')
    return undefined;
  return new StagingSlab(bytes);
}
