import type { Serializer } from '@nestjs/microservices';
import { BARE_ID_PREFIX } from './json-interop.deserializer';

interface OutgoingPacket {
  id?: string;
  response?: unknown;
  err?: unknown;
  status?: string;
  isDisposed?: boolean;
}

/**
 * Replies as DESIGN.md §4 shapes them: `{id, response}` or `{id, err}`. Nest adds
 * `isDisposed`, which its own ClientProxy needs to complete the reply stream, so it is
 * kept for callers that sent Nest's envelope and dropped for bare-JSON clients, to whom
 * it is noise.
 */
export class ReplySerializer implements Serializer<OutgoingPacket, { data: string }> {
  serialize(packet: OutgoingPacket): { data: string } {
    const { isDisposed, status: _status, ...reply } = packet;
    const bare = packet.id?.startsWith(BARE_ID_PREFIX) ?? false;
    return { data: JSON.stringify(bare ? reply : { ...reply, isDisposed }) };
  }
}
