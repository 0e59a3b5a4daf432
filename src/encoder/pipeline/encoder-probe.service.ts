import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Clock } from '../../common/clock';
import { Errors } from '../../common/errors/error-catalogue';
import { MMError } from '../../common/errors/mm-error';
import { withTimeout } from '../../common/timeout';
import { AppConfig } from '../../config/app-config';
import { EncoderBackend } from '../backend/encoder-backend';
import { EncodeScheduler } from '../scheduler/encode-scheduler.service';
import { forwardPart } from '../preprocess/preprocess.types';
import { Preprocessor } from '../preprocess/preprocessor.service';

/** A 32×32 black PNG: the functional health probe's input (SGLang uses the same). */
const PROBE_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAGUlEQVRIx+3BMQEAAADCoPVP7WENoAAAAG4MIAABjE4cpQAAAABJRU5ErkJggg==',
  'base64',
);

export interface ProbeResult {
  ok: true;
  latency_ms: number;
  /** `probe`: a real encode ran; `recent-batch`: busy, and a forward completed recently. */
  source: 'probe' | 'recent-batch';
}

/**
 * Functional health: a real preprocess + forward of a tiny PNG, bounded by
 * encoder.probeTimeoutMs. While the worker is busy it does not answer 200 blindly
 * (SGLang's blind spot): a forward that completed within probeFreshMs proves the model
 * path works; otherwise the probe jumps the queue and must finish in time.
 */
@Injectable()
export class EncoderProbe {
  private lastOkAt = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly preprocessor: Preprocessor,
    private readonly backend: EncoderBackend,
    private readonly scheduler: EncodeScheduler,
  ) {}

  async probe(): Promise<ProbeResult> {
    const started = this.clock.now();
    const { probeFreshMs, probeTimeoutMs } = this.config.encoder;
    const last = this.scheduler.stats().lastBatchCompletedAt;
    if (this.scheduler.busy && last !== null && started - last <= probeFreshMs) {
      return { ok: true, latency_ms: 0, source: 'recent-batch' };
    }
    try {
      await withTimeout(this.run(started + probeTimeoutMs), probeTimeoutMs, () =>
        Errors.encoderNotReady(`health probe did not finish within ${probeTimeoutMs} ms`),
      );
    } catch (err) {
      if (err instanceof MMError && err.code === 503) throw err;
      throw Errors.encoderNotReady(`health probe failed: ${(err as Error).message}`);
    }
    this.lastOkAt = this.clock.now();
    return { ok: true, latency_ms: this.lastOkAt - started, source: 'probe' };
  }

  /** For readiness checks: a probe that passed within `maxAgeMs` is not repeated. */
  async probeCached(maxAgeMs: number): Promise<ProbeResult> {
    if (this.clock.now() - this.lastOkAt <= maxAgeMs)
      return { ok: true, latency_ms: 0, source: 'probe' };
    return this.probe();
  }

  private async run(deadline: number): Promise<void> {
    const { audioMels } = await this.backend.info();
    const pre = await this.preprocessor.run('image', [PROBE_PNG], audioMels);
    if (!pre.ok) throw new Error(pre.message);
    const result = await this.scheduler.submit({
      reqId: `HEALTH_CHECK_${randomUUID().replace(/-/g, '')}`,
      kind: pre.kind,
      fusable: true,
      part: forwardPart(pre),
      items: 1,
      deadline,
      priority: true,
    });
    result.output.slot?.drop(); // nothing is staged: its slab slot (if any) goes back now
    if (result.output.tokens !== pre.tokens)
      throw Errors.tokenMismatch(result.output.tokens, pre.tokens);
  }
}
