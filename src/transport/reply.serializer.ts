import type { Serializer } from '@nestjs/microservices';
import { BARE_ID_PREFIX } from './json-interop.deserializer';
import { utf8 } from './utf8';

interface OutgoingPacket {
  id?: string;
  response?: unknown;
  err?: unknown;
  status?: string;
  isDisposed?: boolean;
}

/**
 * Replies as docs/contract.md §1 shapes them: `{id, response}` or `{id, err}`. Nest adds
 * `isDisposed`, which its own ClientProxy needs to complete the reply stream, so it is
 * kept for callers that sent Nest's envelope and dropped for bare-JSON clients, to whom
 * it is noise.
 */
export class ReplySerializer implements Serializer<OutgoingPacket, { data: Uint8Array }> {
  serialize(packet: OutgoingPacket): { data: Uint8Array } {
    const { id, err } = packet;
    // Built field by field: this runs once per reply on the wait_metadata hot path.
    const reply = err === undefined ? { id, response: packet.response } : { id, err };
    if (id?.startsWith(BARE_ID_PREFIX)) return { data: utf8(JSON.stringify(reply)) };
    return { data: utf8(JSON.stringify({ ...reply, isDisposed: packet.isDisposed })) };
  }
}
