import { Injectable, Logger } from '@nestjs/common';
import { RequestError, TimeoutError, headers } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { NatsConnectionService } from './nats-connection.service';
import { injectNats } from '../tracing/tracing';

/** Below this much time left, another attempt could not be answered anyway. */
const MIN_ATTEMPT_MS = 50;

interface Reply {
  response?: unknown;
  err?: { code?: number; type?: string; message?: string; req_id?: string };
}

/** What a forwarded call's two transport failures become, in the caller's words. */
export interface ForwardFailures {
  /** Nobody subscribes to the subject: the addressee is gone. */
  noResponders: () => Error;
  /** The deadline passed without an answer. */
  timeout: () => Error;
}

/**
 * How long one attempt of a forwarded call waits for its answer before the call is sent
 * again (within its deadline). Core NATS is at-most-once: while a cluster's routes settle
 * after a node restart, a request or its reply can be dropped without a trace, and the
 * caller would wait out its whole deadline for an answer that is never coming.
 */
export const FORWARD_ATTEMPT_MS = 5000;

/**
 * The one client that forwards a call to another process over NATS (owner routing to a
 * peer instance): the body with the remaining deadline as `timeout_ms` and a `Deadline`
 * header, and the addressee's answer returned unchanged, its error body rethrown as the
 * same MMError (code, type, message, req_id). An attempt with no answer within
 * FORWARD_ATTEMPT_MS is sent again while the deadline allows: every forwarded call is
 * idempotent at its owner (a send joins the delivery already under way, registrations and
 * releases are sets, the rest are reads).
 */
@Injectable()
export class NatsForwarder {
  private readonly logger = new Logger('Forwarder');
  /** Attempts sent again because the one before had no answer (lost in transit). */
  resent = 0;

  constructor(
    private readonly nats: NatsConnectionService,
    private readonly clock: Clock,
  ) {}

  async request<T>(
    subject: string,
    body: object,
    deadline: number,
    reqId: string | undefined,
    failures: ForwardFailures,
  ): Promise<T> {
    const nc = await this.nats.connection();
    let reply: Reply;
    for (let attempt = 1; ; attempt++) {
      const remaining = Math.max(1, deadline - this.clock.now());
      const payload = JSON.stringify({ ...body, timeout_ms: remaining });
      const max = nc.info?.max_payload;
      if (max !== undefined && Buffer.byteLength(payload) > max) {
        throw Errors.payloadTooLarge(
          Buffer.byteLength(payload),
          max,
          "the NATS server's max_payload",
        );
      }
      const h = headers();
      h.set('Deadline', String(deadline));
      injectNats(h); // the owner's spans continue this call's trace
      const timeout = Math.min(remaining, FORWARD_ATTEMPT_MS);
      try {
        reply = (await nc.request(subject, payload, { timeout, headers: h })).json<Reply>();
        break;
      } catch (err) {
        if (err instanceof RequestError && err.isNoResponders()) throw failures.noResponders();
        if (err instanceof TimeoutError || (err as Error).cause instanceof TimeoutError) {
          if (deadline - this.clock.now() > MIN_ATTEMPT_MS) {
            this.resent++;
            // Debug: an owner still waiting for the embedding looks the same from here.
            this.logger.debug(
              { subject, req_id: reqId, attempt },
              'no answer to a forwarded call within an attempt; sending it again',
            );
            continue;
          }
          throw failures.timeout();
        }
        throw err;
      }
    }
    if (reply.err) {
      const e = reply.err;
      throw Errors.remote(
        e.message ?? 'forwarded call failed',
        e.code ?? 500,
        e.req_id ?? reqId,
        e.type,
      );
    }
    return reply.response as T;
  }
}
