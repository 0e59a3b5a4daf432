import { Injectable } from '@nestjs/common';
import { RequestsReport, type RanksRequestsView } from '../admin/requests-report';
import { LocalRanks } from '../routing/local-ranks';

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
