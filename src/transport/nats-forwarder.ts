import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';
import { Errors } from '../common/errors/error-catalogue';
import { NatsConnectionService } from './nats-connection.service';
import { injectNats } from '../tracing/tracing';
import { RECEIPT_ATTEMPTS, requestWithReceipts } from './receipts';
import { instanceSubjectFor } from './subjects';

interface Reply {
  response?: unknown;
  err?: { code?: number; type?: string; message?: string; req_id?: string };
}

/** What a forwarded call's transport failures become, in the caller's words. */
export interface ForwardFailures {
  /**
   * Nobody subscribes to the subject: the addressee is gone, or (undefined) it may only be
   * moving to another node, and the attempt counts as lost in transit. `final`: every
   * attempt met no responders, the last one included; the addressee is gone (an Error).
   */
  noResponders: (final: boolean) => Error | undefined;
  /**
   * No attempt was acknowledged, or (`taken`) the addressee took the call and then
   * answered no probe: it could not be reached (retryable).
   */
  unreachable: (taken: boolean) => Error;
  /** The addressee took the call, and the deadline passed without its answer. */
  timeout: () => Error;
}

/**
 * The one client that forwards a call to another process over NATS (owner routing to a
 * peer instance): the body with the remaining deadline as `timeout_ms` and a `Deadline`
 * header, and the addressee's answer returned unchanged, its error body rethrown as the
 * same MMError (code, type, message, req_id).
 *
 * Under the receipt protocol (receipts.ts): a send lost in transit is sent again, an
 * answer lost in transit is asked for again, and an owner that never takes the call, or
 * takes it and then falls silent, is the caller's `unreachable` error (503, retryable,
 * naming the owner) within about a second, never silence until the deadline. Every
 * forwarded call is idempotent at its owner, and its CallLedger runs each call once.
 */
@Injectable()
export class NatsForwarder {
  private readonly logger = new Logger('Forwarder');
  /** Sends made again: before a receipt (lost in transit), or after one (asking again). */
  resent = 0;
  probes = 0;

  constructor(
    private readonly nats: NatsConnectionService,
    private readonly clock: Clock,
    private readonly config: AppConfig,
  ) {}

  /** `request` to instance `instance`'s own subject for `dp` (owner routing to a peer). */
  toInstance<T>(
    instance: string,
    dp: string,
    body: object,
    deadline: number,
    reqId: string | undefined,
    failures: ForwardFailures,
  ): Promise<T> {
    const subject = instanceSubjectFor(this.config.nats.subjectPrefix, instance, dp);
    return this.request<T>(subject, body, deadline, reqId, failures);
  }

  async request<T>(
    subject: string,
    body: object,
    deadline: number,
    reqId: string | undefined,
    failures: ForwardFailures,
    /** How long past the deadline an answer is still awaited (a load client's slack). */
    answerGraceMs = 0,
  ): Promise<T> {
    const nc = await this.nats.connection();
    const max = nc.info?.max_payload;
    let gone: Error | undefined;
    const outcome = await requestWithReceipts(nc, {
      subject,
      deadline,
      answerBy: deadline + answerGraceMs,
      now: () => this.clock.now(),
      body: (remaining) => {
        const payload = JSON.stringify({ ...body, timeout_ms: remaining });
        const bytes = Buffer.byteLength(payload);
        if (max !== undefined && bytes > max)
          throw Errors.payloadTooLarge(bytes, max, "the NATS server's max_payload");
        return payload;
      },
      headers: (h) => injectNats(h), // the owner's spans continue this call's trace
      gone: (final) => (gone = failures.noResponders(final)) !== undefined,
      onResend: (probe) => {
        if (probe) return void this.probes++;
        this.resent++;
        this.logger.debug(
          { subject, req_id: reqId },
          'forwarded call not acknowledged (lost in transit); sending it again',
        );
      },
    });
    switch (outcome.kind) {
      case 'gone':
        throw gone!;
      case 'unreachable':
        this.logger.warn(
          { subject, req_id: reqId, attempts: RECEIPT_ATTEMPTS, taken: outcome.received },
          outcome.received
            ? 'owner took the forwarded call, then stopped answering'
            : 'forwarded call never acknowledged',
        );
        throw failures.unreachable(outcome.received);
      case 'deadline':
        throw outcome.received ? failures.timeout() : failures.unreachable(false);
      case 'answer':
        break;
    }
    const reply = outcome.msg.json<Reply>();
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
