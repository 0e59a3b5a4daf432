import type { MsgHdrs } from '@nats-io/transport-node';
import {
  createParamDecorator,
  Injectable,
  type ExecutionContext,
  type PipeTransform,
} from '@nestjs/common';
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
  ctx: NatsContext | undefined,
  now: number,
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
  ctx: NatsContext | undefined,
  now: number,
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

  /** Each call's deadline, computed once however many times it is asked for. */
  private readonly calls = new WeakMap<object, number>();

  /** The absolute deadline (epoch ms) of the call `call` reads (see callOf). */
  forCall(call: Call): number {
    let deadline = this.calls.get(call.holder);
    if (deadline === undefined) {
      deadline = this.of(call.fields, call.nats);
      this.calls.set(call.holder, deadline);
    }
    return deadline;
  }

  /** The absolute deadline (epoch ms) of a call. */
  of(payload: DeadlineFields, ctx?: NatsContext): number {
    return callDeadline(payload, this.config.timeouts.reqTimeoutMs, ctx, this.clock.now());
  }
}

/** What a call's deadline is read from, before its payload is validated. */
export interface Call {
  /** The HTTP request or the NATS context: one per call, the key of its deadline. */
  holder: object;
  fields: DeadlineFields;
  nats?: NatsContext;
}

const finite = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * The deadline fields of a call over either transport: the NATS payload and its headers,
 * or the HTTP body (over HTTP, the `Deadline` header is not read). Fields that are not
 * numbers are left out here; the payload's own validation rejects them with a 400.
 */
export function callOf(context: ExecutionContext): Call {
  const fieldsOf = (payload: unknown): DeadlineFields => {
    const p = (payload ?? {}) as Record<string, unknown>;
    return { timeout_ms: finite(p.timeout_ms), deadline_ms: finite(p.deadline_ms) };
  };
  if (context.getType() === 'rpc') {
    const rpc = context.switchToRpc();
    const nats = rpc.getContext<NatsContext>();
    return { holder: nats, fields: fieldsOf(rpc.getData()), nats };
  }
  const req = context.switchToHttp().getRequest<{ body?: unknown }>();
  return { holder: req, fields: fieldsOf(req.body) };
}

@Injectable()
export class DeadlinePipe implements PipeTransform<Call, number> {
  constructor(private readonly deadlines: Deadlines) {}

  transform(call: Call): number {
    return this.deadlines.forCall(call);
  }
}

@Injectable()
export class TimeoutPipe implements PipeTransform<Call, number> {
  constructor(
    private readonly deadlines: Deadlines,
    private readonly clock: Clock,
  ) {}

  transform(call: Call): number {
    return Math.max(1, this.deadlines.forCall(call) - this.clock.now());
  }
}

const call = createParamDecorator((_: unknown, context: ExecutionContext) => callOf(context));

/**
 * The call's absolute deadline (epoch ms), over HTTP and NATS alike: the earliest of
 * `timeout_ms`, `deadline_ms` and the NATS `Deadline` header, capped by EPD_REQ_TIMEOUT_MS.
 */
export const CallDeadline = () => call(DeadlinePipe);

/** The milliseconds left until the call's deadline (at least 1). */
export const CallTimeoutMs = () => call(TimeoutPipe);
