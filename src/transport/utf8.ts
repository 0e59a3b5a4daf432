import { TE } from '@nats-io/nats-core/internal';

/**
 * A string's UTF-8 bytes, for a NATS payload. nats.js encodes a string payload with
 * `TextEncoder.encode`, which on Node 20 allocates an ArrayBuffer of its own per call and
 * is several times slower than `Buffer.from` for short strings, which slices Node's shared
 * pool (nodejs/node#50485): on the shed path of an overloaded process, string payloads'
 * encoding was the largest single cost in a CPU profile. The bytes are the same (both write
 * UTF-8 and replace a lone surrogate with U+FFFD); a Buffer is a Uint8Array, which nats.js
 * sends as it is. A reply kept beyond the call (the call ledger) is copied out of the pool.
 */
export const utf8 = (text: string): Uint8Array => Buffer.from(text, 'utf8');

/**
 * nats.js writes a protocol line for every message it publishes (`PUB <subject> <reply>
 * <len>\r\n`, each reply included) and encodes it with one shared TextEncoder, `TE` of
 * @nats-io/nats-core (pinned in package.json): the same per-call allocation as above, once
 * per message, on every answer this process sends. Its `encode` becomes `utf8`, with the
 * same bytes (the unit test compares them, and fails if the pinned version no longer has
 * `TE`). Only the TCP transport is used here, which writes a Uint8Array as it is; nats.js
 * copies or concatenates what it encodes, and keeps no ArrayBuffer of it. Idempotent.
 */
export function encodeNatsProtocolWithBuffer(): void {
  if (TE.encode === encodeProtocol) return;
  Object.defineProperty(TE, 'encode', { value: encodeProtocol, configurable: true });
}

/** `utf8`, with TextEncoder's empty default for no argument. */
const encodeProtocol = (text = ''): Uint8Array => utf8(text);
