import { utf8 } from './utf8';

describe('utf8 (NATS payloads encoded without TextEncoder)', () => {
  const te = new TextEncoder();

  it.each([
    ['ASCII', '{"id":"epd-bare-1","response":{"embedding_len":1176}}'],
    ['multi-byte', 'req-é-中文-🙂'],
    ['a lone surrogate', 'a\ud800b'],
    ['empty', ''],
  ])('writes the bytes TextEncoder writes: %s', (_name, text) => {
    expect(Buffer.from(utf8(text))).toEqual(Buffer.from(te.encode(text)));
  });

  it('is a Uint8Array, as nats.js sends a payload unchanged', () => {
    expect(utf8('x')).toBeInstanceOf(Uint8Array);
  });
});
