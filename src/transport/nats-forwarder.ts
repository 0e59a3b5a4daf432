import { Injectable, Logger } from '@nestjs/common';
import {
  createInbox,
  headers,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { NatsConnectionService } from './nats-connection.service';
import { injectNats } from '../tracing/tracing';

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
  /** No attempt was acknowledged: the addressee could not be reached (retryable). */
  unreachable: () => Error;
  /** The addressee took the call, and the deadline passed without its answer. */
  timeout: () => Error;
}

/**
 * The request header that asks the server for a receipt, and the receipt's header: an
 * empty message with `Epd-Receipt: received` on the reply subject, sent the moment the
 * call is taken, before the answer. Opt-in: a caller that does not ask (SGLang's) sees
 * one reply, as before.
 */
export const RECEIPT_HEADER = 'Epd-Receipt';
export const RECEIPT_VALUE = 'received';

/**
 * How long an attempt of a forwarded call waits for its receipt before it is sent again,
 * and how many attempts are made before the addressee is called unreachable. Core NATS is
 * at-most-once, and a request can be lost without a trace: measured on a 3-node
 * nats-server 2.9 cluster with plain nats.js clients and no service at all, 16 of 4,706
 * requests sent in the 4 s after a node was killed were never delivered (all of them
 * ~1.8–1.9 s after the kill). A receipt tells a lost request from a slow answer at once:
 * a call that waits for an encode is taken within milliseconds and then answered late.
 */
export const RECEIPT_MS = 300;
export const RECEIPT_ATTEMPTS = 3;

type Outcome =
  | { kind: 'answer'; msg: Msg }
  | { kind: 'no-receipt' }
  | { kind: 'no-responders' }
  | { kind: 'deadline'; received: boolean };

const isNoResponders = (h: MsgHdrs | undefined) => h?.code === 503;

/**
 * The one client that forwards a call to another process over NATS (owner routing to a
 * peer instance): the body with the remaining deadline as `timeout_ms` and a `Deadline`
 * header, and the addressee's answer returned unchanged, its error body rethrown as the
 * same MMError (code, type, message, req_id).
 *
 * Each attempt asks for a receipt (RECEIPT_HEADER). An attempt with no receipt within
 * RECEIPT_MS was lost in transit, and is sent again: every forwarded call is idempotent at
 * its owner (a send joins the delivery already under way, registrations and releases are
 * sets, the rest are reads). After RECEIPT_ATTEMPTS attempts without one, the call fails
 * at once with the caller's `unreachable` error (503, retryable, naming the owner), never
 * silence until the deadline. Once the owner has the call, the answer is awaited until the
 * deadline. An answer that comes without a receipt (an owner that sends none) counts.
 */
@Injectable()
export class NatsForwarder {
  private readonly logger = new Logger('Forwarder');
  /** Attempts sent again because the one before was not acknowledged (lost in transit). */
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
    /** How long past the deadline an answer is still awaited (a load client's slack). */
    answerGraceMs = 0,
  ): Promise<T> {
    const nc = await this.nats.connection();
    let outcome: Outcome | undefined;
    let everyAttemptNoResponders = true;
    for (let attempt = 1; attempt <= RECEIPT_ATTEMPTS; attempt++) {
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
      h.set(RECEIPT_HEADER, '1');
      injectNats(h); // the owner's spans continue this call's trace
      outcome = await this.attempt(
        nc,
        subject,
        payload,
        h,
        Math.min(remaining, RECEIPT_MS),
        deadline + answerGraceMs,
      );
      if (outcome.kind === 'no-responders') {
        const last = attempt === RECEIPT_ATTEMPTS || deadline - this.clock.now() <= RECEIPT_MS;
        const gone = failures.noResponders(last && everyAttemptNoResponders);
        if (gone) throw gone;
        // Maybe only moving to another node: counted as lost in transit, tried again.
        outcome = { kind: 'no-receipt' };
        await new Promise((r) => setTimeout(r, Math.min(RECEIPT_MS, deadline - this.clock.now())));
      } else {
        everyAttemptNoResponders = false;
      }
      if (outcome.kind !== 'no-receipt') break;
      if (attempt < RECEIPT_ATTEMPTS && deadline - this.clock.now() > 1) {
        this.resent++;
        this.logger.debug(
          { subject, req_id: reqId, attempt },
          'forwarded call not acknowledged (lost in transit); sending it again',
        );
      }
    }
    switch (outcome!.kind) {
      case 'no-responders': // handled above
      case 'no-receipt':
        this.logger.warn(
          { subject, req_id: reqId, attempts: RECEIPT_ATTEMPTS },
          'forwarded call never acknowledged',
        );
        throw failures.unreachable();
      case 'deadline':
        throw outcome!.received ? failures.timeout() : failures.unreachable();
      case 'answer':
        break;
    }
    const reply = outcome!.msg.json<Reply>();
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

  /** One attempt on its own inbox: its receipt, then its answer (or why neither came). */
  private attempt(
    nc: NatsConnection,
    subject: string,
    payload: string,
    h: MsgHdrs,
    receiptMs: number,
    deadline: number,
  ): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      const inbox = createInbox();
      let received = false;
      const timers: NodeJS.Timeout[] = [];
      const done = (outcome: Outcome) => {
        for (const t of timers) clearTimeout(t);
        sub.unsubscribe();
        resolve(outcome);
      };
      const sub = nc.subscribe(inbox, {
        max: 2,
        callback: (err, msg) => {
          if (err) return done({ kind: 'deadline', received });
          if (isNoResponders(msg.headers) && msg.data.length === 0) {
            return done({ kind: 'no-responders' });
          }
          if (msg.headers?.get(RECEIPT_HEADER) === RECEIPT_VALUE) {
            received = true;
            return;
          }
          done({ kind: 'answer', msg });
        },
      });
      timers.push(
        setTimeout(() => {
          if (!received) done({ kind: 'no-receipt' });
        }, receiptMs),
        setTimeout(
          () => done({ kind: 'deadline', received }),
          Math.max(1, deadline - this.clock.now()),
        ),
      );
      nc.publish(subject, payload, { reply: inbox, headers: h });
    });
  }
}
