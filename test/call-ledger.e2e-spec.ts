import { headers, type NatsConnection } from '@nats-io/transport-node';
import { requestWithReceipts } from '../src/transport/receipts';
import { serviceWithClient, type ServiceProcess } from './support/service-process';
import { waitFor } from './support/calls';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };

/**
 * The call ledger of the receipt protocol, attacked and loaded from outside ("Hardening,
 * third pass" M3, M4, M11, M13).
 */
describe('call ledger bounds and scope (e2e, built service process)', () => {
  let prefix: string;
  let svc: ServiceProcess;
  let nc: NatsConnection;
  let close: () => Promise<void>;
  const ledger = async () =>
    Number(
      /^epd_encoder_nats_calls_tracked (\d+)/m.exec(
        await (await fetch(`${svc.url}/metrics`)).text(),
      )?.[1] ?? NaN,
    );
  const call = (dp: string, body: unknown, id: string, deadline = Date.now() + 60_000) => {
    const h = headers();
    h.set('Epd-Receipt', '1');
    h.set('Epd-Call', id);
    h.set('Deadline', String(deadline));
    return nc.request(`${prefix}.v1.${dp}`, JSON.stringify(body), { timeout: 5000, headers: h });
  };

  beforeAll(async () => {
    ({ svc, nc, prefix, close } = await serviceWithClient());
  }, 60_000);
  afterAll(() => close?.());

  it('M3: a call id of 900 KiB is not kept (300 such calls once kept 299 MB); the call is answered', async () => {
    const before = await ledger();
    const big = 'k'.repeat(900 * 1024);
    for (let i = 0; i < 30; i++) {
      const h = headers();
      h.set('Epd-Call', `${big}${i}`);
      const reply = await nc.request(
        `${prefix}.v1.has_metadata`,
        JSON.stringify({ req_id: `m3-${i}` }),
        { timeout: 5000, headers: h },
      );
      // Answered, and not kept: the call runs once, outside the ledger.
      expect(reply.json()).toMatchObject({ response: { present: false } });
    }
    expect(await ledger()).toBe(before);
  });

  it('M13: a reused call id on another dp_type runs as its own call', async () => {
    const id = `m13-${Math.random()}`;
    await nc.request(
      `${prefix}.v1.publish_metadata`,
      JSON.stringify({ req_id: 'm13', metadata: META }),
      { timeout: 5000 },
    );
    // The same id, sent by hand on has_metadata then on wait_metadata: each its own answer.
    const a = await call('has_metadata', { req_id: 'm13' }, id);
    expect(a.headers?.get('Epd-Receipt')).toBe('received');
    await waitFor(async () => (await ledger()) > 0);
    // Before, the second was answered with the first call's answer and never ran.
    const sub = nc.subscribe(`_M13.${prefix}`, { max: 2 });
    const h = headers();
    h.set('Epd-Receipt', '1');
    h.set('Epd-Call', id);
    nc.publish(`${prefix}.v1.wait_metadata`, JSON.stringify({ req_id: 'm13', timeout_ms: 2000 }), {
      reply: `_M13.${prefix}`,
      headers: h,
    });
    const answers: unknown[] = [];
    for await (const m of sub) if (m.data.length > 0) answers.push(m.json());
    expect(answers).toEqual([
      expect.objectContaining({ response: expect.objectContaining({ embedding_len: 1 }) }),
    ]);
  });

  it('M11: a call on a tenant subject with a malformed tenant is refused 400, never acts in the shared space', async () => {
    await nc.request(
      `${prefix}.v1.publish_metadata`,
      JSON.stringify({ req_id: 'm11-shared', metadata: META }),
      { timeout: 5000 },
    );
    const reply = await nc.request(
      `${prefix}.v1.t.bad$name.has_metadata`,
      JSON.stringify({ req_id: 'm11-shared' }),
      { timeout: 5000 },
    );
    expect(reply.json()).toMatchObject({
      err: { code: 400, message: expect.stringMatching(/invalid tenant name/) },
    });
    const released = await nc.request(
      `${prefix}.v1.t.bad$name.release`,
      JSON.stringify({ req_id: 'm11-shared' }),
      { timeout: 5000 },
    );
    expect(released.json()).toMatchObject({ err: { code: 400 } });
    const still = await nc.request(
      `${prefix}.v1.has_metadata`,
      JSON.stringify({ req_id: 'm11-shared' }),
      { timeout: 5000 },
    );
    expect(still.json()).toMatchObject({ response: { present: true } });
  });

  it('M4: 12,000 cheap calls with far deadlines leave room; a long wait under the protocol is answered, not "stopped answering"', async () => {
    const waiting = requestWithReceipts(nc, {
      subject: `${prefix}.v1.wait_metadata`,
      body: (ms) => JSON.stringify({ req_id: 'm4-late', timeout_ms: ms }),
      deadline: Date.now() + 20_000,
      now: () => Date.now(),
    });
    const far = Date.now() + 170_000;
    for (let i = 0; i < 12_000; i += 500)
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          call('has_metadata', { req_id: `m4-${i + j}` }, `m4-${i + j}-${Math.random()}`, far),
        ),
      );
    await nc.request(
      `${prefix}.v1.publish_metadata`,
      JSON.stringify({ req_id: 'm4-late', metadata: META }),
      { timeout: 5000 },
    );
    const outcome = await waiting;
    expect(outcome.kind).toBe('answer');
    if (outcome.kind === 'answer')
      expect(outcome.msg.json()).toMatchObject({ response: { embedding_len: 1 } });
    // Answered calls leave the ledger seconds after their answer, not at their deadline.
    await waitFor(async () => (await ledger()) === 0, 15_000, 200);
  }, 60_000);
});
