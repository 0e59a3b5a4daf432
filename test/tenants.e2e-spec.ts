import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { EncoderClient } from '../src/client';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { callAs, encodeBody, waitFor } from './support/calls';
import { recordFault } from './support/fault-report';
import { CallLedger, natsAnswer } from './support/ledger';
import { dataUri, image } from './support/media';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const TENANTS = join(__dirname, '..', 'deploy', 'nats', 'tenants.conf');
const PASS = {
  EPD_ENCODER_PASS: 'enc-pw-1',
  EPD_ALPHA_CLIENT_PASS: 'ac-pw-2',
  EPD_ALPHA_PREFILL_PASS: 'ap-pw-3',
  EPD_BETA_CLIENT_PASS: 'bc-pw-4',
  EPD_BETA_PREFILL_PASS: 'bp-pw-5',
  EPD_ADMIN_PASS: 'adm-pw-6',
};
type Identity = 'alpha_client' | 'alpha_prefill' | 'beta_client' | 'beta_prefill';
const passOf = (user: Identity) => PASS[`EPD_${user.toUpperCase()}_PASS` as keyof typeof PASS];

/**
 * "Security, second pass", N3 and N9: with the roles on, a receiver could act on any
 * req_id. The `prefill` user released a `client` user's staged req_id (the client's send
 * then got already_released), tombstoned a future id (the client's encode got 409), and
 * had the encoder push the client's embedding to a listener it opened (16,583 B arrived).
 * A namespace anyone could name could be poisoned with trusted hashes.
 *
 * Now tenants are subject prefixes (deploy/nats/tenants.conf, verbatim): each tenant's
 * identities publish only under `epd.v1.t.<tenant>.>`, and its req_ids and cache entries
 * are its own. The same three attacks, from tenant beta on tenant alpha, must do nothing.
 */
describe('tenants as subject prefixes (e2e, N3/N9)', () => {
  let nats: NatsServer;
  let svc: ServiceProcess;
  let rx: ReferenceReceiver;
  let attackerRx: ReferenceReceiver;
  const frames: { req_id: string; bytes: number }[] = [];
  let attackerBytes = 0;
  const conns: NatsConnection[] = [];
  const as = async (user: Identity) => {
    const nc = await connect({
      servers: nats.url,
      user,
      pass: passOf(user),
      inboxPrefix: `_INBOX_${user}`,
    });
    conns.push(nc);
    return nc;
  };
  /** One call on `epd.v1.t.<tenant>.<dp>`, as `nc`. */
  const call = (nc: NatsConnection, tenant: string, dp: string, body: object) =>
    callAs(nc, `t.${tenant}.${dp}`, body);
  /** `send` of `reqId` as `tenant`, to a listener on loopback `port`. */
  const send = (nc: NatsConnection, tenant: string, reqId: string, port: number) =>
    call(nc, tenant, 'send', {
      req_id: reqId,
      prefill_host: '127.0.0.1',
      embedding_port: port,
      timeout_ms: 5000,
    });
  let png: string;

  beforeAll(async () => {
    nats = await NatsServer.start({ config: readFileSync(TENANTS, 'utf8'), env: PASS });
    svc = await startServiceProcess({
      EPD_NATS_URL: nats.url,
      EPD_NATS_USER: 'encoder',
      EPD_NATS_PASS: PASS.EPD_ENCODER_PASS,
      EPD_SUBJECT_PREFIX: 'epd',
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_CACHE_MAX_BYTES: String(16 * 1024 * 1024),
      EPD_CACHE_TRUST_CLIENT_HASH: 'true',
    });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) =>
        void frames.push({ req_id: header.req_id, bytes: data.length }),
    });
    attackerRx = await ReferenceReceiver.start({
      onFrame: ({ data }) => void (attackerBytes += data.length),
    });
    png = dataUri(await image(64, 64, 'png'), 'image/png');
  }, 60_000);

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await rx?.close();
    await attackerRx?.close();
    await svc?.stop();
    await nats?.dispose();
  });

  it("N3: a receiver of another tenant can neither release, tombstone nor redirect a tenant's req_ids", async () => {
    const [alphaClient, alphaPrefill, betaPrefill] = await Promise.all([
      as('alpha_client'),
      as('alpha_prefill'),
      as('beta_prefill'),
    ]);
    const ledger = new CallLedger();
    const track = <R extends object>(label: string, send: () => Promise<R>) =>
      ledger.track(label, 10_000, send, (r) => natsAnswer(r as { err?: { type?: unknown } }));

    // alpha stages R; beta releases "R" (its own R), tombstones "F", and asks for R's push.
    const encoded = await track('alpha encode R', () =>
      call(alphaClient, 'alpha', 'encode', encodeBody('n3-R', [png])),
    );
    expect(encoded?.err).toBeUndefined();
    await track('beta release R', () => call(betaPrefill, 'beta', 'release', { req_id: 'n3-R' }));
    await track('beta release F', () => call(betaPrefill, 'beta', 'release', { req_id: 'n3-F' }));
    const push = await track('beta send R', () =>
      send(betaPrefill, 'beta', 'n3-R', attackerRx.port),
    );
    // beta's own n3-R was never encoded: that is all beta can learn.
    expect(push?.err).toMatchObject({ type: expect.any(String) });

    // alpha is untouched: R is still staged and delivered, under its own name; F encodes.
    const sent = await track('alpha send R', () => send(alphaPrefill, 'alpha', 'n3-R', rx.port));
    expect(sent?.err).toBeUndefined();
    expect(frames.find((f) => f.req_id === 'n3-R')?.bytes).toBeGreaterThan(0);
    expect(frames.some((f) => f.req_id.includes('/'))).toBe(false);
    const future = await track('alpha encode F', () =>
      call(alphaClient, 'alpha', 'encode', encodeBody('n3-F', [png])),
    );
    expect(future?.err).toBeUndefined();
    // The reply names the req_id as alpha sent it.
    expect((future as { response?: { req_id?: string } }).response?.req_id).toBe('n3-F');

    // And a tenant's identity cannot publish on another tenant's subjects at all.
    await expect(call(betaPrefill, 'alpha', 'release', { req_id: 'n3-R' })).rejects.toThrow(
      /permission/i,
    );

    recordFault('n3-tenant-boundary', {
      fault: "N3: tenant beta's receiver releases, tombstones and redirects tenant alpha's req_ids",
      ledger,
      // Embedding bytes that reached beta's listener: alpha's work taken from it.
      silentlyLost: attackerBytes,
      // alpha's calls that the attack broke (they must all succeed).
      leftBehind: ledger.entries.filter((e) => e.label.startsWith('alpha') && e.outcome !== 'ok')
        .length,
    });
    expect(attackerBytes).toBe(0);
  });

  it("N9: another tenant's trusted hashes can neither poison nor reveal a tenant's cache", async () => {
    const [alphaClient, betaClient] = await Promise.all([as('alpha_client'), as('beta_client')]);
    const small = dataUri(await image(56, 56, 'png', { r: 1, g: 2, b: 3 }), 'image/png');
    const large = dataUri(await image(224, 224, 'png', { r: 3, g: 2, b: 1 }), 'image/png');
    const poisoned = (id: string, items: string[]) => ({
      ...encodeBody(id, items),
      hashes: ['same-hash'],
      cache_namespace: 'shared-name',
    });
    type Reply = {
      response?: { embedding_len: number; timings: { cache_hits?: number } };
      err?: unknown;
    };
    // beta files its small image under the hash and namespace alpha will use.
    const planted = (await call(betaClient, 'beta', 'encode', poisoned('n9-b', [small]))) as Reply;
    expect(planted.err).toBeUndefined();
    const victim = (await call(alphaClient, 'alpha', 'encode', poisoned('n9-a', [large]))) as Reply;
    expect(victim.err).toBeUndefined();
    expect(victim.response?.timings.cache_hits ?? 0).toBe(0);
    expect(victim.response?.embedding_len).toBeGreaterThan(planted.response!.embedding_len);
    // The same bytes as alpha's, from beta: encoded again, so beta cannot tell alpha had it.
    const probe = (await call(betaClient, 'beta', 'encode', encodeBody('n9-c', [large]))) as Reply;
    expect(probe.response?.timings.cache_hits ?? 0).toBe(0);
    // Within alpha, the cache serves as before.
    const again = (await call(
      alphaClient,
      'alpha',
      'encode',
      encodeBody('n9-d', [large]),
    )) as Reply;
    expect(again.response?.timings.cache_hits).toBe(1);
  });

  it('the client library acts as a tenant, with receipts and probes under its permissions', async () => {
    const nc = await as('alpha_client');
    const client = await EncoderClient.connect({ connection: nc, tenant: 'alpha' });
    // A wait that outlives three probe rounds (500 ms apart): each probe, on alpha's probe
    // subject, must be answered, or the client would give up with 503 unacknowledged.
    const joined = async () => {
      const text = await (await fetch(`${svc.url}/metrics`)).text();
      const m = /epd_encoder_nats_repeated_calls_total\{outcome="joined"\} (\d+)/.exec(text);
      return Number(m?.[1] ?? 0);
    };
    const before = await joined();
    const waited = client.waitMetadata('lib-1', { timeoutMs: 8000, retries: 1 });
    // Each probe of the running wait joins it: three of them, then the encode.
    await waitFor(async () => (await joined()) >= before + 3, 6000, 100);
    const res = await client.encode({ req_id: 'lib-1', modality: 'image', mm_items: [png] });
    expect(res.req_id).toBe('lib-1');
    await expect(waited).resolves.toMatchObject({ req_id: 'lib-1' });
    await client.release('lib-1');
    await client.close();
  });

  it("refuses, over HTTP (the shared space), a req_id that could name a tenant's", async () => {
    const r = await fetch(`${svc.url}/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ req_id: 'alpha/n3-R', prefill_host: '127.0.0.1', embedding_port: 1 }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { message: string }).message).toMatch(/may not contain "\/"/);
  });
});
