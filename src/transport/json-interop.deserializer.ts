import type { Msg } from '@nats-io/transport-node';
import type { ConsumerDeserializer, IncomingEvent, IncomingRequest } from '@nestjs/microservices';
import { Errors } from '../common/errors/error-catalogue';
import { RejectedPayload } from '../common/validation/zod.pipe';
import { scopedReqId, sharedReqIdProblem, TENANT_SEP, unscopeReply } from '../common/tenant';
import { spaceOf, type CallSpace } from './tenant-scope';
import { utf8 } from './utf8';

/** Ids this deserializer gives bare-JSON requests; the reply serializer recognises them. */
export const BARE_ID_PREFIX = 'epd-bare-';

function isEnvelope(v: unknown): v is { pattern: unknown; data: unknown; id?: unknown } {
  return typeof v === 'object' && v !== null && 'pattern' in v && 'data' in v;
}

/**
 * Accepts Nest's `{pattern, data, id}` envelope and bare JSON from any NATS client
 * (Python, Go, the `nats` CLI). A bare request that carries a reply subject gets an id,
 * because Nest treats id-less messages as events and would never answer them. Bytes that
 * cannot become a payload (over the size limit, not JSON) still get an id and reach the
 * handler as a RejectedPayload, so the caller is answered 413/400 instead of timing out.
 *
 * It is also where a call's req_id enters its space (tenant-scope.ts): a tenant's is made
 * inner and the reply made outer again; a shared-space one that could name a tenant's is
 * refused (400).
 */
export class JsonInteropDeserializer implements ConsumerDeserializer {
  private seq = 0;

  constructor(
    private readonly maxRequestBytes: number,
    private readonly subjectPrefix: string,
  ) {}

  deserialize(msg: Msg, options?: Record<string, unknown>): IncomingRequest | IncomingEvent {
    const pattern = (options?.channel as string | undefined) ?? msg.subject;
    const packet = (data: unknown, id?: string): IncomingRequest | IncomingEvent =>
      id ? { pattern, data, id } : { pattern, data };
    const replyId = () => (msg.reply ? `${BARE_ID_PREFIX}${++this.seq}` : undefined);
    const size = msg.data.length;
    if (size > this.maxRequestBytes) {
      const error = Errors.payloadTooLarge(size, this.maxRequestBytes, 'EPD_MAX_REQUEST_BYTES');
      return packet(new RejectedPayload(error), replyId());
    }
    let value: unknown = {};
    if (size > 0) {
      try {
        value = JSON.parse(msg.string());
      } catch (err) {
        return packet(new RejectedPayload(Errors.notJson((err as Error).message)), replyId());
      }
    }
    let id: string | undefined;
    let data = value;
    if (isEnvelope(value)) {
      id = typeof value.id === 'string' && value.id ? value.id : undefined;
      data = value.data;
    }
    id ??= replyId();
    const problem = this.enterSpace(spaceOf(this.subjectPrefix, msg.subject), data, msg);
    return packet(problem ? new RejectedPayload(Errors.badRequest(problem)) : data, id);
  }

  /** Scopes a tenant's req_id in `data` (in place); the problem, if it may not enter. */
  private enterSpace(space: CallSpace, data: unknown, msg: Msg): string | undefined {
    if (space.kind === 'invalid')
      return `invalid tenant name ${JSON.stringify(space.tenant.slice(0, 80))}: 1-64 of A-Z a-z 0-9 _ -`;
    if (space.kind === 'internal' || typeof data !== 'object' || data === null) return;
    const p = data as { req_id?: unknown };
    if (space.kind === 'shared') return sharedReqIdProblem(p.req_id);
    if (typeof p.req_id !== 'string') return;
    if (p.req_id.includes(TENANT_SEP)) return sharedReqIdProblem(p.req_id);
    const inner = scopedReqId(space.tenant, p.req_id);
    p.req_id = inner;
    // The reply says the caller's req_id again (the ledger, wrapped inside, keeps that).
    const respond = msg.respond.bind(msg);
    msg.respond = (reply, opts) =>
      respond(
        typeof reply === 'string' || reply instanceof Uint8Array
          ? utf8(
              unscopeReply(
                typeof reply === 'string'
                  ? reply
                  : Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength).toString('utf8'),
                inner,
              ),
            )
          : reply,
        opts,
      );
  }
}
