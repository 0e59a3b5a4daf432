import type { Msg } from '@nats-io/transport-node';
import { RejectedPayload } from '../common/validation/zod.pipe';
import { JsonInteropDeserializer } from './json-interop.deserializer';

function msg(body: string, reply?: string, subject = 'epd.v1.wait_metadata'): Msg {
  const data = new TextEncoder().encode(body);
  const sent: unknown[] = [];
  return {
    subject,
    reply,
    data,
    string: () => body,
    sent,
    respond: (d: unknown) => sent.push(d),
  } as unknown as Msg;
}

describe('JsonInteropDeserializer', () => {
  const d = new JsonInteropDeserializer(64, 'epd');
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

  describe('tenants as subject prefixes (N3)', () => {
    const big = new JsonInteropDeserializer(4096, 'epd');
    it("scopes a tenant's req_id, and says the caller's again in the reply", () => {
      const m = msg('{"req_id":"r1"}', '_INBOX.1', 'epd.v1.t.alpha.release');
      const out = big.deserialize(m, { channel: 'release' }) as { data: { req_id: string } };
      expect(out.data.req_id).toBe('alpha/r1');
      m.respond('{"response":{"req_id":"alpha/r1"},"err":"no req_id=alpha/r1"}');
      const sent = (m as unknown as { sent: (string | Uint8Array)[] }).sent;
      expect(
        sent.map((x) => (typeof x === 'string' ? x : Buffer.from(x).toString('utf8'))),
      ).toEqual(['{"response":{"req_id":"r1"},"err":"no req_id=r1"}']);
    });

    it("refuses, in the shared space, a req_id that could name a tenant's (400)", () => {
      for (const subject of ['epd.v1.release', 'epd.v1.rank.0.release', 'epd.v1.probe.i.release']) {
        const out = big.deserialize(msg('{"req_id":"alpha/r1"}', '_INBOX.1', subject), {
          channel: 'release',
        }) as { data: RejectedPayload };
        expect(out.data).toBeInstanceOf(RejectedPayload);
        expect(out.data.error.code).toBe(400);
        expect(out.data.error.message).toMatch(/req_id may not contain "\/"/);
      }
    });

    it("refuses a tenant's req_id that names another tenant's, and leaves calls between encoders as they are", () => {
      const nested = big.deserialize(
        msg('{"req_id":"beta/r1"}', '_INBOX.1', 'epd.v1.t.alpha.send'),
        {
          channel: 'send',
        },
      ) as { data: RejectedPayload };
      expect(nested.data).toBeInstanceOf(RejectedPayload);
      const forwarded = big.deserialize(
        msg('{"req_id":"alpha/r1"}', '_INBOX.1', 'epd.v1.inst.host-1-abc.send'),
        { channel: 'send' },
      ) as { data: { req_id: string } };
      expect(forwarded.data.req_id).toBe('alpha/r1');
    });
  });
});
