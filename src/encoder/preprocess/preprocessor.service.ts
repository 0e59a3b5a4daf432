import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import Piscina from 'piscina';
import { AppConfig } from '../../config/app-config';
import type { Modality } from '../encode-request.schema';
import { workerFile } from '../workers/worker-file';
import type { PreprocessResult, PreprocessTask } from './preprocess.types';

/** Decode, resize and patchify in a pool of worker threads (EPD_PREPROCESS_THREADS). */
@Injectable()
export class Preprocessor implements OnModuleDestroy {
  private readonly pool: Piscina;

  constructor(private readonly config: AppConfig) {
    this.pool = new Piscina({
      filename: workerFile(__dirname, 'preprocess.worker'),
      minThreads: config.encoder.preprocessThreads,
      maxThreads: config.encoder.preprocessThreads,
      idleTimeout: Infinity,
      // Admission (EPD_MAX_PENDING) already bounds the work in flight; this is a backstop.
      maxQueue: config.encoder.maxPending + 16,
    });
  }

  run(modality: Modality, items: Buffer[]): Promise<PreprocessResult> {
    const task: PreprocessTask = {
      modality,
      items,
      minPixels: this.config.encoder.minPixels,
      maxPixels: this.config.encoder.maxPixels,
      maxVideoFrames: this.config.encoder.maxVideoFrames,
    };
    return this.pool.run(task) as Promise<PreprocessResult>;
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool.destroy();
  }
}
