import { Injectable } from '@nestjs/common';
import { EncodeGateway, type ProbeReply } from './encode-gateway';
import type { EncodeRequest } from './encode-request.schema';
import type { EncodeResponse } from './encode-response';
import { EncoderProbe } from './pipeline/encoder-probe.service';
import { EncoderService } from './pipeline/encoder.service';

/** This process's own pipeline and probe (one process, or a DP worker). */
@Injectable()
export class LocalEncodeGateway extends EncodeGateway {
  constructor(
    private readonly encoder: EncoderService,
    private readonly prober: EncoderProbe,
  ) {
    super();
  }

  encode(_raw: object, req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    return this.encoder.encode(req, deadline);
  }

  probe(): Promise<ProbeReply> {
    return this.prober.probe();
  }
}
