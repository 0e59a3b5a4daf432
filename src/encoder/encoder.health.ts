import { Injectable } from '@nestjs/common';
import { EncoderHealth, type EncoderHealthReport } from '../health/encoder-health';
import { EncoderProbe } from './pipeline/encoder-probe.service';

/** A real encode (cached for 5 s), or recent forward progress while busy. */
@Injectable()
export class ProbeEncoderHealth extends EncoderHealth {
  constructor(private readonly probe: EncoderProbe) {
    super();
  }

  async check(): Promise<EncoderHealthReport> {
    try {
      const r = await this.probe.probeCached(5000);
      return { up: true, data: { source: r.source, latency_ms: r.latency_ms } };
    } catch (err) {
      return { up: false, data: { error: (err as Error).message } };
    }
  }
}
