import { ReplySerializer } from './reply.serializer';
import { BARE_ID_PREFIX } from './json-interop.deserializer';

describe('ReplySerializer', () => {
  const serializer = new ReplySerializer();
  const text = (data: Uint8Array) => Buffer.from(data).toString('utf8');

  it("answers a bare-JSON caller with {id, response} as UTF-8 bytes, without Nest's isDisposed", () => {
    const out = serializer.serialize({
      id: `${BARE_ID_PREFIX}7`,
      response: { req_id: 'r-é' },
      isDisposed: true,
    });
    expect(out.data).toBeInstanceOf(Uint8Array);
    expect(JSON.parse(text(out.data))).toEqual({
      id: `${BARE_ID_PREFIX}7`,
      response: { req_id: 'r-é' },
    });
  });

  it("keeps isDisposed for a caller that sent Nest's envelope, and sends err as it is", () => {
    const err = { status: 'error', code: 504, type: 'timeout', message: 'm' };
    const out = serializer.serialize({ id: 'nest-1', err, isDisposed: true });
    expect(JSON.parse(text(out.data))).toEqual({ id: 'nest-1', err, isDisposed: true });
  });
});
