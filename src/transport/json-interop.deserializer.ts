import type { Msg } from '@nats-io/transport-node';
import type { ConsumerDeserializer, IncomingEvent, IncomingRequest } from '@nestjs/microservices';
import { Errors } from '../common/errors/error-catalogue';
import { RejectedPayload } from '../common/validation/zod.pipe';

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
 */
export class JsonInteropDeserializer implements ConsumerDeserializer {
  private seq = 0;

  constructor(private readonly maxRequestBytes: number) {}

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
    if (isEnvelope(value)) {
      const id = typeof value.id === 'string' && value.id ? value.id : replyId();
      return packet(value.data, id);
    }
    return packet(value, replyId());
  }
}
