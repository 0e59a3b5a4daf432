import { Injectable } from '@nestjs/common';
import { RequestError, TimeoutError, headers } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { NatsConnectionService } from './nats-connection.service';
import { injectNats } from '../tracing/tracing';

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
 * The one client that forwards a call to another process over NATS (owner routing to a
 * peer instance, DP dispatch to a worker): the body with the remaining deadline as
 * `timeout_ms` and a `Deadline` header, and the addressee's answer returned unchanged,
 * its error body rethrown as the same MMError (code, type, message, req_id).
 */
@Injectable()
export class NatsForwarder {
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
    const timeout = Math.max(1, deadline - this.clock.now());
    const payload = JSON.stringify({ ...body, timeout_ms: timeout });
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
    let reply: Reply;
    try {
      reply = (await nc.request(subject, payload, { timeout, headers: h })).json<Reply>();
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders()) throw failures.noResponders();
      if (err instanceof TimeoutError || (err as Error).cause instanceof TimeoutError) {
        throw failures.timeout();
      }
      throw err;
    }
    if (reply.err) {
      const e = reply.err;
      throw new MMError(
        e.message ?? 'forwarded call failed',
        e.code ?? 500,
        e.req_id ?? reqId,
        e.type,
      );
    }
    return reply.response as T;
  }
}
