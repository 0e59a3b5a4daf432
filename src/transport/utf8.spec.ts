import { TE } from '@nats-io/nats-core/internal';
import { encodeNatsProtocolWithBuffer, utf8 } from './utf8';

const SAMPLES: [string, string][] = [
  ['ASCII', '{"id":"epd-bare-1","response":{"embedding_len":1176}}'],
  ['a protocol line', 'PUB _INBOX.Hx7kAbCdEfGhIjKlMn.42 57\r\n'],
  ['multi-byte', 'req-é-中文-🙂'],
  ['a lone surrogate', 'a\ud800b'],
  ['empty', ''],
];

describe('utf8 (NATS payloads encoded without TextEncoder)', () => {
  const te = new TextEncoder();

  it.each(SAMPLES)('writes the bytes TextEncoder writes: %s', (_name, text) => {
    expect(Buffer.from(utf8(text))).toEqual(Buffer.from(te.encode(text)));
  });

  it('is a Uint8Array, as nats.js sends a payload unchanged', () => {
    expect(utf8('x')).toBeInstanceOf(Uint8Array);
  });
});

describe("nats.js's protocol encoder (encodeNatsProtocolWithBuffer)", () => {
  const te = new TextEncoder();
  beforeAll(() => encodeNatsProtocolWithBuffer());

  it('replaces the encode of the TextEncoder the pinned nats.js writes protocol lines with', () => {
    expect(TE).toBeInstanceOf(TextEncoder);
    expect(Object.prototype.hasOwnProperty.call(TE, 'encode')).toBe(true);
    expect(TE.encode('x')).toBeInstanceOf(Buffer);
    encodeNatsProtocolWithBuffer(); // idempotent
    expect(TE.encode('x')).toBeInstanceOf(Buffer);
  });

  it.each(SAMPLES)('writes the bytes TextEncoder writes: %s', (_name, text) => {
    expect(Buffer.from(TE.encode(text))).toEqual(Buffer.from(te.encode(text)));
  });

  it('encodes no argument as nothing, as TextEncoder does', () => {
    expect(TE.encode(undefined).length).toBe(0);
  });

  it('leaves every other TextEncoder alone', () => {
    expect(new TextEncoder().encode('x')).not.toBeInstanceOf(Buffer);
  });
});
