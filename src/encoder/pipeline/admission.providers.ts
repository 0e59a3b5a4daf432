import type { Provider } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { AppConfig } from '../../config/app-config';
import { visionModelsOf } from '../../config/model-dir';
import { LoadMeter } from './load-meter';
import { WorkBudget } from './work-budget';

/**
 * The encode pipeline's two meters, built here and injected (the admission, the metrics,
 * the body parser and the scaling signal read the same ones):
 * - WorkBudget: every request's loaded media and planned decode and model input at once
 *   (EPD_WORK_MAX_BYTES); with several models, each holds at most its share
 *   (EPD_MODEL_WORK_SHARE);
 * - LoadMeter: arrivals, completions and busy time, this process's input to the
 *   autoscaling signal (EPD_SCALE_WINDOW_S).
 */
export const ADMISSION_PROVIDERS: Provider[] = [
  {
    provide: WorkBudget,
    inject: [AppConfig, Clock],
    useFactory: (config: AppConfig, clock: Clock) =>
      new WorkBudget(
        config.encoder.workMaxBytes,
        () => clock.now(),
        visionModelsOf(config.encoder).map((m) => m.name),
        config.encoder.modelWorkShare,
      ),
  },
  {
    provide: LoadMeter,
    inject: [AppConfig, Clock],
    useFactory: (config: AppConfig, clock: Clock) =>
      new LoadMeter(() => clock.now(), config.scale.windowS),
  },
];
