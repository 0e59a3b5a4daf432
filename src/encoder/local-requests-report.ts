import { Injectable } from '@nestjs/common';
import { requestsView, type RequestsView } from '../admin/request-views';
import { RequestsReport } from '../admin/requests-report';
import { Clock } from '../common/clock';
import { ReqStateStore } from '../requests/req-state.store';
import { EncoderBackend } from './backend/encoder-backend';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { parcelsHeld } from './workers/parcel';

/** A process that encodes (single, or a DP worker): the requests with state here. */
@Injectable()
export class LocalRequestsReport extends RequestsReport {
  constructor(
    private readonly states: ReqStateStore,
    private readonly clock: Clock,
    private readonly admission: EncodeAdmission,
    private readonly backend: EncoderBackend,
  ) {
    super();
  }

  local(): RequestsView {
    return requestsView(this.states, this.clock, {
      pending: this.admission.pendingRequests,
      modelInputsHeld: parcelsHeld(),
      slab: this.backend.stagingSlab,
    });
  }

  view(): Promise<RequestsView> {
    return Promise.resolve(this.local());
  }
}
