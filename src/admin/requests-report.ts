import type { RequestsView } from './request-views';

export type RanksRequestsView = { ranks: ({ dp_rank: number } & RequestsView)[] };

/**
 * GET /admin/requests: this process's requests (the encoder side provides it), or, in a
 * DP supervisor, each rank's (the dispatch side provides that one).
 */
export abstract class RequestsReport {
  abstract view(): Promise<RequestsView | RanksRequestsView>;
}
