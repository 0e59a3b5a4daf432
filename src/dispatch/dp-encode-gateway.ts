import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { EncodeGateway, type ProbeReply } from '../encoder/encode-gateway';
import type { EncodeRequest } from '../encoder/encode-request.schema';
import type { EncodeResponse } from '../encoder/encode-response';
import { DpType } from '../transport/subjects';
import { DpDispatcher, mergeRankAnswers } from './dp-dispatcher.service';

/** `encode` dispatched to a worker, and the probe of every rank (one line each). */
@Injectable()
export class DpEncodeGateway extends EncodeGateway {
  constructor(
    private readonly dispatcher: DpDispatcher,
    private readonly config: AppConfig,
  ) {
    super();
  }

  encode(raw: object, req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    return this.dispatcher.encode(raw, req, deadline);
  }

  async probe(): Promise<ProbeReply> {
    const answers = await this.dispatcher.broadcast<ProbeReply>(
      DpType.HealthEncode,
      {},
      this.config.encoder.probeTimeoutMs,
    );
    const msg = mergeRankAnswers(answers, (p) => `ok (${p.source}, ${p.latency_ms} ms)`);
    const latency = Math.max(...answers.map((a) => a.value?.latency_ms ?? 0));
    return { ok: true, latency_ms: latency, source: 'dp', msg };
  }
}
