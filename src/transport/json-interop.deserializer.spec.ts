import type { Msg } from '@nats-io/transport-node';
import { RejectedPayload } from '../common/validation/zod.pipe';
import { JsonInteropDeserializer } from './json-interop.deserializer';

function msg(body: string, reply?: string): Msg {
  const data = new TextEncoder().encode(body);
  return { subject: 'epd.v1.wait_metadata', reply, data, string: () => body } as unknown as Msg;
}

describe('JsonInteropDeserializer', () => {
  const d = new JsonInteropDeserializer(64);
  const opts = { channel: 'wait_metadata' };

  it('passes a Nest envelope through with its id', () => {
    const out = d.deserialize(
      msg('{"pattern":"x","data":{"req_id":"r"},"id":"abc"}', '_INBOX.1'),
      opts,
    );
    expect(out).toEqual({ pattern: 'wait_metadata', data: { req_id: 'r' }, id: 'abc' });
  });

  it('gives bare JSON with a reply subject an id, so Nest answers it', () => {
    const out = d.deserialize(msg('{"req_id":"r"}', '_INBOX.1'), opts) as {
      id?: string;
      data: unknown;
    };
    expect(out.data).toEqual({ req_id: 'r' });
    expect(out.id).toMatch(/^epd-bare-\d+$/);
  });

  it('treats bare JSON without a reply subject as an event', () => {
    expect(d.deserialize(msg('{"req_id":"r"}'), opts)).toEqual({
      pattern: 'wait_metadata',
      data: { req_id: 'r' },
    });
  });

  it('hands invalid JSON to the handler as a 400 it can answer', () => {
    const out = d.deserialize(msg('{nope', '_INBOX.1'), opts) as {
      data: RejectedPayload;
      id: string;
    };
    expect(out.data).toBeInstanceOf(RejectedPayload);
    expect(out.data.error.code).toBe(400);
    expect(out.data.error.message).toMatch(/^request body is not valid JSON/);
    expect(out.id).toBeDefined();
  });

  it('rejects payloads over the limit with 413 without parsing them', () => {
    const out = d.deserialize(msg(`{"x":"${'a'.repeat(100)}"}`, '_INBOX.1'), opts) as {
      data: RejectedPayload;
    };
    expect(out.data.error.code).toBe(413);
    expect(out.data.error.message).toMatch(/exceeds the limit of 64 bytes/);
  });

  it('reads an empty body as {}', () => {
    expect((d.deserialize(msg('', '_INBOX.1'), opts) as { data: unknown }).data).toEqual({});
  });
});
