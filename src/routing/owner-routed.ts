import {
  applyDecorators,
  Injectable,
  SetMetadata,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { from, lastValueFrom, type Observable } from 'rxjs';
import { callOf, Deadlines } from '../common/deadline';
import { reqIdSchema } from '../meta-registry/meta.schema';
import type { DpType } from '../transport/subjects';
import { OwnerRouter, routeOptions } from './owner-router.service';

/**
 * Which req_ids this process answers for: it holds their state, or released them recently.
 * Provided by the request state (RequestsModule); the routing reads it through this port.
 */
export abstract class LocalReqIds {
  abstract answersFor(reqId: string): boolean;
}

interface OwnerRoutedSpec {
  dp: DpType;
  /** See RouteOptions.waitForEncode: `send` and registration wait for an encode to start. */
  waitForEncode?: boolean;
  /** The HTTP twin's reply when the owner answered (the NATS reply is the owner's own). */
  forwarded?: (reqId: string, answer: unknown) => unknown;
}

const OWNER_ROUTED = 'epd:owner-routed';

/**
 * A per-req_id call (docs/contract.md §1), over NATS or HTTP: answered by this handler when
 * this process holds the req_id, else by its owner (OwnerRouter), with the call's deadline.
 * The handler is then one service call; it runs only here.
 */
export const OwnerRouted = (dp: DpType, options: Omit<OwnerRoutedSpec, 'dp'> = {}) =>
  applyDecorators(
    SetMetadata(OWNER_ROUTED, { dp, ...options }),
    UseInterceptors(OwnerRoutingInterceptor),
  );

/**
 * Routes before the payload's validation: a req_id that fails it is left to the handler's
 * own pipe (a 400 here); the owner validates a forwarded payload itself.
 */
@Injectable()
export class OwnerRoutingInterceptor implements NestInterceptor {
  constructor(
    private readonly reflector: Reflector,
    private readonly router: OwnerRouter,
    private readonly deadlines: Deadlines,
    private readonly local: LocalReqIds,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const spec = this.reflector.get<OwnerRoutedSpec>(OWNER_ROUTED, context.getHandler());
    const body = payloadOf(context);
    const reqId = reqIdSchema.safeParse(body?.req_id);
    if (!spec || !reqId.success) return next.handle();
    const call = callOf(context);
    let here = false;
    const answer = this.router.route<unknown>(
      spec.dp,
      reqId.data,
      body!,
      this.deadlines.forCall(call),
      () => {
        here = true;
        return lastValueFrom(next.handle() as Observable<unknown>);
      },
      routeOptions(this.local, reqId.data, call.nats, spec.waitForEncode),
    );
    return from(
      answer.then((value) => (here || !spec.forwarded ? value : spec.forwarded(reqId.data, value))),
    );
  }
}

/** The payload a peer would be sent: the NATS payload, or the HTTP route's req_id or body. */
function payloadOf(context: ExecutionContext): { req_id?: unknown } | undefined {
  if (context.getType() === 'rpc') return context.switchToRpc().getData<{ req_id?: unknown }>();
  const req = context
    .switchToHttp()
    .getRequest<{ params?: { req_id?: string }; body?: { req_id?: unknown } }>();
  return req.params?.req_id !== undefined ? { req_id: req.params.req_id } : req.body;
}
