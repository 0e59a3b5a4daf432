import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { AppConfig } from '../config/app-config';
import { preprocessingView } from '../config/model-dir';
import { ReqStateStore } from '../requests/req-state.store';
import { EncoderBackend } from './backend/encoder-backend';
import { Preprocessor } from './preprocess/preprocessor.service';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { encoderStats, type EncoderStats } from './worker-reports.service';
import { EncodeScheduler } from './scheduler/encode-scheduler.service';
import type { ServedModel } from './backend/model-marker';

interface Preprocessing {
  patch_size: number;
  merge_size: number;
  temporal_patch_size: number;
  image_mean: number[];
  image_std: number[];
  min_pixels: number;
  max_pixels: number;
  model_dir: string | null;
  pixels_from: string;
  /** Each served vision model's own values (the default's are the fields above). */
  per_model: ReturnType<typeof preprocessingView>[];
}

interface WorkerView {
  dp_rank: number;
  pid: number;
  alive: boolean;
  pending: number;
  staged_bytes: number;
  restarts: number;
  last_exit_code: number | null;
  /**
   * Operating-system thread ids (Linux: /proc/<pid>/task/<tid>, whose schedstat gives each
   * one's CPU time): the event loop, the preprocessing threads, and the inference thread
   * (ONNX Runtime's own intra-op threads are not listed).
   */
  threads?: { main: number; preprocessing: number[]; inference: number[] };
}

/** The encoder's processes and its batching scheduler. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class WorkersAdminController {
  constructor(
    private readonly config: AppConfig,
    private readonly admission: EncodeAdmission,
    private readonly states: ReqStateStore,
    private readonly scheduler: EncodeScheduler,
    private readonly preprocessor: Preprocessor,
    private readonly backend: EncoderBackend,
  ) {}

  /**
   * The encoder worker processes (docs/contract.md §2): in one process (EPD_DP_SIZE=1) this one,
   * with the columns a DP supervisor fills per rank.
   */
  @Get('workers')
  workers(): { dp_size: number; workers: WorkerView[] } {
    return {
      dp_size: 1,
      workers: [
        {
          dp_rank: this.config.encoder.dpRank,
          pid: process.pid,
          alive: true,
          pending: this.admission.pendingRequests,
          staged_bytes: this.states.stats().usedBytes,
          restarts: 0,
          last_exit_code: null,
          threads: {
            main: process.pid,
            preprocessing: this.preprocessor.threadIds,
            inference: this.backend.threadIds,
          },
        },
      ],
    };
  }

  /**
   * Batching scheduler counters (forwards by fused size, skips, isolation retries), and the
   * working-memory budget under `memory`.
   */
  @Get('encoder')
  encoderStats(): EncoderStats & { models: readonly ServedModel[]; preprocessing: Preprocessing } {
    const e = this.config.encoder;
    const g = this.preprocessor.geometry;
    return {
      ...encoderStats(this.scheduler, this.admission),
      models: this.backend.models,
      // The effective values, and where they came from.
      preprocessing: {
        patch_size: g.patchSize,
        merge_size: g.mergeSize,
        temporal_patch_size: g.temporalPatchSize,
        image_mean: [...g.imageMean],
        image_std: [...g.imageStd],
        min_pixels: e.minPixels,
        max_pixels: e.maxPixels,
        model_dir: e.modelDir ?? null,
        // Every served vision model (the default first), as requests choose it by `model`.
        per_model: [...this.preprocessor.models.values()].map(preprocessingView),
        pixels_from: e.modelDir
          ? `${e.modelDir}/preprocessor_config.json, unless EPD_MIN_PIXELS / EPD_MAX_PIXELS are set`
          : 'EPD_MIN_PIXELS / EPD_MAX_PIXELS',
      },
    };
  }
}
