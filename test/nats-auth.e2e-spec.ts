import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { callAs, encodeBody, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const run = promisify(execFile);
const ROLES = join(__dirname, '..', 'deploy', 'nats', 'roles.conf');
const PASS = {
  EPD_ENCODER_PASS: 'enc-pw-1',
  EPD_PREFILL_PASS: 'pre-pw-2',
  EPD_CLIENT_PASS: 'cli-pw-3',
  EPD_ADMIN_PASS: 'adm-pw-4',
};

/** A CA and a server certificate for 127.0.0.1, made with openssl for this run. */
async function certificates(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const f = (name: string) => join(dir, name);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=epd-test-ca',
  ]);
  await run('openssl', [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    f('server.key'),
    '-out',
    f('server.csr'),
    '-subj',
    '/CN=127.0.0.1',
  ]);
  // nats.js names the server localhost when it verifies an address: both are in the SAN.
  writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-out',
    f('server.pem'),
    '-days',
    '2',
    '-extfile',
    f('ext.cnf'),
  ]);
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}

/**
 * NATS with TLS and the sample per-role permissions (deploy/nats/roles.conf, verbatim):
 * found by the outside review, any NATS client could release another client's req_id,
 * publish wrong metadata for it, and start profiling. The encoder runs as `encoder` with
 * the shared JetStream store and the cache (so the sample's KV permissions are exercised).
 */
describe('NATS TLS, authentication and per-role permissions (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-tls-'));
  let tls: { ca: string; cert: string; key: string };
  let nats: NatsServer;
  let svc: ServiceProcess;
  const conns: NatsConnection[] = [];
  // Each identity receives replies under its own inbox prefix (roles.conf).
  const as = async (user: string, pass: string) => {
    const nc = await connect({
      servers: nats.url,
      user,
      pass,
      tls: { caFile: tls.ca },
      inboxPrefix: `_INBOX_${user}`,
    });
    conns.push(nc);
    return nc;
  };
  const call = callAs;

  beforeAll(async () => {
    tls = await certificates(dir);
    nats = await NatsServer.start({
      config: `tls { cert_file: "${tls.cert}", key_file: "${tls.key}" }\n${readFileSync(ROLES, 'utf8')}`,
      env: PASS,
    });
    svc = await startServiceProcess({
      EPD_NATS_URL: nats.url,
      EPD_NATS_USER: 'encoder',
      EPD_NATS_PASS: PASS.EPD_ENCODER_PASS,
      EPD_NATS_TLS_CA: tls.ca,
      EPD_SUBJECT_PREFIX: 'epd',
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_CACHE_MAX_BYTES: String(16 * 1024 * 1024),
      // The object store tier on the sample's `$O.epd_embeddings.>` permissions.
      EPD_CACHE_STORE: 'jetstream',
      // Small buckets: JetStream reserves each one's bound from the server's disk budget.
      EPD_OBJ_MAX_BYTES: String(256 * 1024 * 1024),
    });
  }, 60_000);

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await svc?.stop();
    await nats?.dispose();
  });

  it('serves each role what it may do, over TLS, with the shared store and the cache', async () => {
    const client = await as('client', PASS.EPD_CLIENT_PASS);
    const prefill = await as('prefill', PASS.EPD_PREFILL_PASS);
    const png = dataUri(await image(64, 64, 'png'), 'image/png');
    for (const r of ['auth-1', 'auth-2']) {
      expect((await call(client, 'encode', encodeBody(r, [png]))).err).toBeUndefined();
    }
    const waited = await call(prefill, 'wait_metadata', { req_id: 'auth-1', timeout_ms: 5000 });
    expect(waited.response).toMatchObject({ req_id: 'auth-1', embedding_dim: 1024 });
    expect((await call(prefill, 'release', { req_id: 'auth-1' })).err).toBeUndefined();
    // The encoded image reached the object store under the encoder's own permissions.
    type Tier = { object_store: { writes: { ok: number; failed: number } } };
    let tier: Tier | undefined;
    await waitFor(
      async () => {
        tier = (await (await fetch(`${svc.url}/admin/cache`)).json()) as Tier;
        return tier.object_store.writes.ok + tier.object_store.writes.failed >= 1;
      },
      10_000,
      50,
    );
    expect(tier!.object_store.writes).toMatchObject({ ok: 1, failed: 0 });
    const admin = await as('admin', PASS.EPD_ADMIN_PASS);
    const started = await call(admin, 'start_profile', {});
    expect(started.response).toMatchObject({ ok: true });
    expect((await call(admin, 'stop_profile', {})).response).toMatchObject({ ok: true });
  });

  it('refuses a receiver identity publish_metadata, start_profile and encode', async () => {
    const prefill = await as('prefill', PASS.EPD_PREFILL_PASS);
    for (const [dp, body] of [
      [
        'publish_metadata',
        { req_id: 'auth-2', metadata: { embedding_size: 4, embedding_len: 1, embedding_dim: 1 } },
      ],
      ['start_profile', {}],
      ['encode', encodeBody('auth-3', ['x'])],
    ] as const) {
      await expect(call(prefill, dp, body)).rejects.toThrow(/permission/i);
    }
    // The metadata the receiver tried to overwrite is untouched.
    const meta = await call(prefill, 'wait_metadata', { req_id: 'auth-2', timeout_ms: 5000 });
    expect(meta.response).toMatchObject({ embedding_dim: 1024 });
  });

  /**
   * N4 (security, second pass): the sample roles let receivers subscribe `_INBOX.>`, and
   * the service set no inbox prefix, so a receiver saw other clients' replies and the
   * encoder's own KV watch deliveries (every metadata record, the roster, the req_ids).
   */
  it("N4: a receiver may subscribe to no inbox but its own, and sees nobody else's replies", async () => {
    const prefill = await as('prefill', PASS.EPD_PREFILL_PASS);
    for (const subject of ['_INBOX.>', '_INBOX_encoder.>', '_INBOX_client.>', '>']) {
      // nats.js ends a refused subscription with the server's error as `closed`'s value.
      const closed = await prefill.subscribe(subject).closed;
      expect(String(closed)).toMatch(/Permissions Violation for Subscription/);
    }
    // Its own inbox, wildcarded: while a client encodes and the encoder writes the shared
    // store, nothing arrives there but the answer to its own call.
    const own: string[] = [];
    const spy = prefill.subscribe('_INBOX_prefill.>', {
      callback: (_e, m) => void own.push(m.subject),
    });
    const client = await as('client', PASS.EPD_CLIENT_PASS);
    const png = dataUri(await image(48, 48, 'png'), 'image/png');
    expect((await call(client, 'encode', encodeBody('n4-1', [png]))).err).toBeUndefined();
    const waited = await call(prefill, 'wait_metadata', { req_id: 'n4-1', timeout_ms: 5000 });
    expect(waited.response).toMatchObject({ req_id: 'n4-1' });
    await prefill.flush();
    expect(own.length).toBeGreaterThanOrEqual(1);
    expect(own.every((s) => s.startsWith('_INBOX_prefill.'))).toBe(true);
    expect(own.length).toBeLessThanOrEqual(2); // its one call: the answer (and a receipt)
    spy.unsubscribe();
  });

  it('refuses anonymous and wrong-password connections, and plain text to a TLS server', async () => {
    await expect(connect({ servers: nats.url, tls: { caFile: tls.ca } })).rejects.toThrow(
      /authoriz/i,
    );
    await expect(
      connect({ servers: nats.url, user: 'prefill', pass: 'wrong', tls: { caFile: tls.ca } }),
    ).rejects.toThrow(/authoriz/i);
    await expect(
      connect({
        servers: nats.url,
        user: 'prefill',
        pass: PASS.EPD_PREFILL_PASS,
        reconnect: false,
        timeout: 2000,
      }),
    ).rejects.toThrow();
  });
});
