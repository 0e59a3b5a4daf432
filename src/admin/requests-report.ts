import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock';
import { EncoderBackend } from '../encoder/backend/encoder-backend';
import { EncodeAdmission } from '../encoder/pipeline/encode-admission.service';
import { ReqStateStore } from '../requests/req-state.store';
import { LocalRanks } from '../routing/local-ranks';
import { requestsView, type RequestsView } from './request-views';

export type RanksRequestsView = { ranks: ({ dp_rank: number } & RequestsView)[] };

/** GET /admin/requests: this process's requests, or, in a DP supervisor, each rank's. */
export abstract class RequestsReport {
  abstract view(): Promise<RequestsView | RanksRequestsView>;
}

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
    return requestsView(
      this.states,
      this.clock,
      this.admission.pendingRequests,
      this.backend.stagingSlab,
    );
  }

  view(): Promise<RequestsView> {
    return Promise.resolve(this.local());
  }
}

/** A DP supervisor holds no request itself: it lists each live rank's. */
@Injectable()
export class DpRequestsReport extends RequestsReport {
  constructor(private readonly ranks: LocalRanks) {
    super();
  }

  async view(): Promise<RanksRequestsView> {
    const answers = await this.ranks.gather('requests');
    return { ranks: answers.map((a) => ({ dp_rank: a.rank, ...a.value })) };
  }
}
