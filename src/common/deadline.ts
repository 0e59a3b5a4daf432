import type { MsgHdrs } from '@nats-io/transport-node';
import { Injectable } from '@nestjs/common';
import type { NatsContext } from '@nestjs/microservices';
import { AppConfig } from '../config/app-config';
import { Clock } from './clock';

export interface DeadlineFields {
  timeout_ms?: number;
  /** Absolute deadline, epoch ms. */
  deadline_ms?: number;
}

/**
 * The deadline of one call: the earliest of `timeout_ms`, `deadline_ms` (epoch ms, in the
 * payload) and the `Deadline` header (epoch ms), capped by the configured maximum.
 * Expired deadlines become 1 ms, so the caller gets the timeout reply at once rather than
 * an unbounded wait.
 */
export function callTimeoutMs(
  requested: number | undefined,
  cap: number,
  ctx?: NatsContext,
  now: number = Date.now(),
  deadlineMs?: number,
): number {
  let ms = requested ?? cap;
  if (deadlineMs !== undefined) ms = Math.min(ms, deadlineMs - now);
  const hdrs = ctx?.getHeaders() as MsgHdrs | undefined;
  const header = hdrs?.get('Deadline');
  if (header) {
    const deadline = Number(header);
    if (Number.isFinite(deadline)) ms = Math.min(ms, deadline - now);
  }
  return Math.max(1, Math.min(ms, cap));
}

/** The absolute deadline (epoch ms) of a call whose payload may carry timeout_ms / deadline_ms. */
export function callDeadline(
  payload: DeadlineFields,
  cap: number,
  ctx?: NatsContext,
  now: number = Date.now(),
): number {
  return now + callTimeoutMs(payload.timeout_ms, cap, ctx, now, payload.deadline_ms);
}

/**
 * Deadlines of incoming calls, the same way for every handler and both transports: the
 * earliest of `timeout_ms`, `deadline_ms` and the NATS `Deadline` header, capped by
 * EPD_REQ_TIMEOUT_MS.
 */
@Injectable()
export class Deadlines {
  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /** The cap on any caller-supplied deadline (EPD_REQ_TIMEOUT_MS). */
  get maxMs(): number {
    return this.config.timeouts.reqTimeoutMs;
  }

  /** The absolute deadline (epoch ms) of a call. */
  of(payload: DeadlineFields, ctx?: NatsContext): number {
    return callDeadline(payload, this.maxMs, ctx, this.clock.now());
  }

  /** The milliseconds a call may take. */
  timeoutMs(payload: DeadlineFields, ctx?: NatsContext): number {
    const now = this.clock.now();
    return callTimeoutMs(payload.timeout_ms, this.maxMs, ctx, now, payload.deadline_ms);
  }
}
