import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import Piscina from 'piscina';
import type { VisionGeometry } from '../../common/vision-geometry';
import { AppConfig } from '../../config/app-config';
import { visionModelsOf, type VisionModelSpec } from '../../config/model-dir';
import type { Modality } from '../encode-request.schema';
import { closePool, createPool, poolThreadIds, runTask } from '../workers/close-pool';
import { hold, parcelChannel } from '../workers/parcel';
import { workerFile } from '../workers/worker-file';
import type { InputPoolStats } from './input-pool';
import type { PlanResult, PreprocessResult, PreprocessTask } from './preprocess.types';

/** Decode, resize and patchify in a pool of worker threads (EPD_PREPROCESS_THREADS). */
@Injectable()
export class Preprocessor implements OnModuleDestroy {
  private readonly pool: Piscina;
  /** The default model's patch geometry (EPD_MODEL_DIR's first, or the default's). */
  readonly geometry: VisionGeometry;
  /** Each vision model's geometry and pixel bounds, by name; the default first. */
  readonly models: ReadonlyMap<string, VisionModelSpec>;
  readonly defaultModel: string;

  constructor(private readonly config: AppConfig) {
    const specs = visionModelsOf(config.encoder);
    this.models = new Map(specs.map((m) => [m.name, m]));
    this.defaultModel = specs[0]!.name;
    this.geometry = specs[0]!.geometry;
    this.pool = createPool({
      filename: workerFile(__dirname, 'preprocess.worker'),
      minThreads: config.encoder.preprocessThreads,
      maxThreads: config.encoder.preprocessThreads,
      idleTimeout: Infinity,
      // 'sync' parks an idle worker in Atomics.wait right after its reply, so nothing on its
      // event loop (reclaimAfter's collection) runs until the next task arrives: the last
      // request's buffers stayed resident meanwhile. 'async' keeps the fast wake-up.
      atomics: 'async',
      // Admission (EPD_MAX_PENDING) already bounds the work in flight; this is a backstop.
      maxQueue: config.encoder.maxPending + 16,
    });
  }

  /** The preprocessing threads' operating-system thread ids (for per-thread CPU accounting). */
  get threadIds(): number[] {
    return poolThreadIds(this.pool);
  }

  /**
   * Reads the media headers only: tokens, decoded pixels, frames, seconds (see MediaPlan).
   * `nMels` (audio) sizes the model input the plan reports; no features are computed.
   */
  plan(modality: Modality, items: Buffer[], nMels = 0, model?: string): Promise<PlanResult> {
    return runTask<PlanResult>(this.pool, this.task(modality, items, nMels, model), {
      name: 'plan',
    });
  }

  /**
   * `nMels`: the audio model's mel bins (ModelInfo.audioMels). `sizes`: images' sizes from
   * their plan (MediaPlan.itemSizes), so that their headers are not read twice. The model
   * input comes back as a Parcel: the values stay out of this thread's heap on their way
   * to the inference thread. Whoever holds the result must forward or `discard` it.
   */
  async run(
    modality: Modality,
    items: Buffer[],
    nMels: number,
    sizes?: [number, number][],
    model?: string,
  ): Promise<PreprocessResult> {
    const { send, receive } = parcelChannel();
    let result: PreprocessResult | undefined;
    try {
      result = await runTask<PreprocessResult>(
        this.pool,
        { ...this.task(modality, items, nMels, model), sizes, parcel: send },
        { transferList: [send] },
      );
    } finally {
      if (!result?.ok) receive.close(); // nothing was shipped
    }
    return result.ok ? { ...result, data: hold(receive) } : result;
  }

  /**
   * A preprocessing thread's model-input buffers (input-pool.ts): reused and fresh so far,
   * waiting now. With several threads, whichever piscina picks.
   */
  inputPool(): Promise<InputPoolStats> {
    return runTask<InputPoolStats>(this.pool, null, { name: 'inputPool' });
  }

  /** `model`: a served vision model's name (checked by the caller); absent, the default. */
  private task(modality: Modality, items: Buffer[], nMels: number, model?: string): PreprocessTask {
    const { maxVideoFrames, maxDecodedPixels } = this.config.encoder;
    const m = this.models.get(model ?? this.defaultModel)!;
    return {
      modality,
      items,
      geometry: m.geometry,
      minPixels: m.minPixels,
      maxPixels: m.maxPixels,
      ...(m.video ? { video: m.video } : {}),
      maxVideoFrames,
      maxDecodedPixels,
      nMels,
    };
  }

  async onModuleDestroy(): Promise<void> {
    await closePool(this.pool, this.config.shutdown.graceMs);
  }
}
