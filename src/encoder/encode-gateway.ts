import type { EncodeRequest } from './encode-request.schema';
import type { EncodeResponse } from './encode-response';

/** The functional probe's answer; a DP supervisor adds one `dp_rank=N: …` line per rank. */
export interface ProbeReply {
  ok: true;
  latency_ms: number;
  /** `probe`: a real encode ran; `recent-batch`: busy, and a forward completed recently; `dp`: every rank's. */
  source: 'probe' | 'recent-batch' | 'dp';
  msg?: string;
}

/**
 * Where `encode` and the functional probe run: this process's pipeline (one process, a
 * DP worker), or a DP supervisor's workers. One controller serves both.
 */
export abstract class EncodeGateway {
  /** `raw`: the body as received, which a supervisor hands on unchanged to its worker. */
  abstract encode(raw: object, req: EncodeRequest, deadline: number): Promise<EncodeResponse>;
  abstract probe(): Promise<ProbeReply>;
}
