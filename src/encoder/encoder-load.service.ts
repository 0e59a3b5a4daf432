import { Injectable } from '@nestjs/common';
import { LoadSource, type LoadSnapshot } from '../common/load';
import { EncodeAdmission } from './pipeline/encode-admission.service';

/** The encoder's own load (arrivals, service rate, queue), for the autoscaling signal. */
@Injectable()
export class EncoderLoad extends LoadSource {
  constructor(private readonly admission: EncodeAdmission) {
    super();
  }

  snapshot(): LoadSnapshot {
    return this.admission.load.snapshot();
  }
}
