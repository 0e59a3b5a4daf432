import { Injectable } from '@nestjs/common';
import { EncoderHealth, type EncoderHealthReport } from '../health/encoder-health';
import { EncoderProbe } from './pipeline/encoder-probe.service';
import { EncoderBackend } from './backend/encoder-backend';

/** A real encode (cached for 5 s), or recent forward progress while busy. */
@Injectable()
export class ProbeEncoderHealth extends EncoderHealth {
  constructor(
    private readonly probe: EncoderProbe,
    private readonly backend: EncoderBackend,
  ) {
    super();
  }

  async check(): Promise<EncoderHealthReport> {
    // Which models answer, and whether any is a stand-in (random weights).
    const models = this.backend.models.map(({ kind, name, family, reference }) => ({
      kind,
      name,
      family,
      reference,
    }));
    try {
      const r = await this.probe.probeCached(5000);
      return { up: true, data: { source: r.source, latency_ms: r.latency_ms, models } };
    } catch (err) {
      return { up: false, data: { error: (err as Error).message, models } };
    }
  }
}
