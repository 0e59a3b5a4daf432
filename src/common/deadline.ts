import type { MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';

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
  payload: { timeout_ms?: number; deadline_ms?: number },
  cap: number,
  ctx?: NatsContext,
  now: number = Date.now(),
): number {
  return now + callTimeoutMs(payload.timeout_ms, cap, ctx, now, payload.deadline_ms);
}
