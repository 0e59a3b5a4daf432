import { Injectable } from '@nestjs/common';
import { EncoderHealth, type EncoderHealthReport } from '../health/encoder-health';
import { EncoderProbe } from './pipeline/encoder-probe.service';
import { EncoderBackend } from './backend/encoder-backend';

/**
 * `check`: a real encode (cached for 5 s), or recent forward progress while busy.
 * `loaded`: the models' load settled and succeeded; nothing runs.
 */
@Injectable()
export class ProbeEncoderHealth extends EncoderHealth {
  /** The models' load: pending, done, or failed with this message. */
  private load: { state: 'loading' } | { state: 'loaded' } | { state: 'failed'; error: string } = {
    state: 'loading',
  };

  constructor(
    private readonly probe: EncoderProbe,
    private readonly backend: EncoderBackend,
  ) {
    super();
    // The same load the pipeline awaits (one per process): only its outcome is read here.
    backend.info().then(
      () => (this.load = { state: 'loaded' }),
      (err: unknown) => (this.load = { state: 'failed', error: (err as Error).message }),
    );
  }

  /** Which models answer, and whether any is a stand-in (random weights). */
  private models() {
    return this.backend.models.map(({ kind, name, family, reference }) => ({
      kind,
      name,
      family,
      reference,
    }));
  }

  loaded(): EncoderHealthReport {
    const models = this.models();
    const load = this.load;
    if (load.state === 'loaded') return { up: true, data: { models_loaded: true, models } };
    if (load.state === 'failed') return { up: false, data: { error: load.error, models } };
    return { up: false, data: { error: 'models are still loading', models } };
  }

  async check(): Promise<EncoderHealthReport> {
    const models = this.models();
    try {
      const r = await this.probe.probeCached(5000);
      return { up: true, data: { source: r.source, latency_ms: r.latency_ms, models } };
    } catch (err) {
      return { up: false, data: { error: (err as Error).message, models } };
    }
  }
}
