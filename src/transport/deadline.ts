import type { MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';

/**
 * The deadline of one call: the smaller of `timeout_ms` and the `Deadline` header (epoch
 * milliseconds), capped by the configured maximum. Expired deadlines become 1 ms, so the
 * caller gets the timeout reply at once rather than an unbounded wait.
 */
export function callTimeoutMs(
  requested: number | undefined,
  cap: number,
  ctx?: NatsContext,
  now: number = Date.now(),
): number {
  let ms = requested ?? cap;
  const hdrs = ctx?.getHeaders() as MsgHdrs | undefined;
  const header = hdrs?.get('Deadline');
  if (header) {
    const deadline = Number(header);
    if (Number.isFinite(deadline)) ms = Math.min(ms, deadline - now);
  }
  return Math.max(1, Math.min(ms, cap));
}
