import { LifecycleEvents } from '../../src/common/lifecycle-events';
import { Clock } from '../../src/common/clock';
import type { AppConfig } from '../../src/config/app-config';
import { loadConfig } from '../../src/config/config.loader';
import { OnnxWorkerBackend } from '../../src/encoder/backend/onnx-worker.backend';
import { forwardPart, type PreprocessOk } from '../../src/encoder/preprocess/preprocess.types';
import { Preprocessor } from '../../src/encoder/preprocess/preprocessor.service';
import {
  EncodeScheduler,
  type JobSpec,
} from '../../src/encoder/scheduler/encode-scheduler.service';

/**
 * The pipeline's real thread stages without the app: the preprocessing pool, the
 * inference thread (ONNX Runtime) and a scheduler over it. `close` stops both pools.
 */
export function encodeThreads(
  // The generated reference models: a test of the threads, not of a real tower.
  config = loadConfig({ EPD_ALLOW_REFERENCE_MODEL: 'true' }).config as AppConfig,
) {
  const preprocessor = new Preprocessor(config);
  const backend = new OnnxWorkerBackend(config);
  const scheduler = new EncodeScheduler(backend, config, new Clock(), new LifecycleEvents());
  return {
    config,
    preprocessor,
    backend,
    scheduler,
    close: () => Promise.all([preprocessor.onModuleDestroy(), backend.onModuleDestroy()]),
    /** A vision job for `pre`, due in a minute. */
    job: (reqId: string, pre: PreprocessOk, over: Partial<JobSpec> = {}): JobSpec => ({
      reqId,
      kind: 'vision',
      fusable: true,
      part: forwardPart(pre),
      items: 1,
      deadline: Date.now() + 60_000,
      ...over,
    }),
  };
}
