import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeAccount, encodeOperator, encodeUser, fmtCreds } from '@nats-io/jwt';
import { createAccount, createOperator, createUser, type KeyPair } from '@nats-io/nkeys';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { callAs, encodeBody } from './support/calls';
import { dataUri, image } from './support/media';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * Decentralized NATS auth: an operator, accounts and users as JWTs signed with NKeys (what
 * `nsc` makes), users connecting with `.creds` files (EPD_NATS_CREDS). The encoder and its
 * receivers live in one account with per-user permissions in their JWTs; a user of
 * another account cannot reach the service at all.
 */
describe('NATS .creds (JWT + NKey) and accounts (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-creds-'));
  let nats: NatsServer;
  let svc: ServiceProcess;
  const conns: NatsConnection[] = [];
  const creds: Record<string, string> = {};

  async function user(
    name: string,
    account: KeyPair,
    permissions: { pub: string[]; sub: string[] },
  ): Promise<string> {
    const kp = createUser();
    const jwt = await encodeUser(name, kp, account, {
      pub: { allow: permissions.pub },
      sub: { allow: permissions.sub },
    });
    const file = join(dir, `${name}.creds`);
    writeFileSync(file, fmtCreds(jwt, kp), { mode: 0o600 });
    return file;
  }
  const as = async (name: string) => {
    const nc = await connect({
      servers: nats.url,
      authenticator: credsAuthenticator(new Uint8Array(readFileSync(creds[name]!))),
    });
    conns.push(nc);
    return nc;
  };
  const call = callAs;

  beforeAll(async () => {
    const operator = createOperator();
    const system = createAccount();
    const epd = createAccount();
    const other = createAccount();
    const operatorJwt = await encodeOperator('epd-operator', operator, {
      system_account: system.getPublicKey(),
    });
    // Unlimited, as `nsc add account` makes them (the library's default is 0 of everything).
    const limits = {
      conn: -1,
      subs: -1,
      data: -1,
      payload: -1,
      imports: -1,
      exports: -1,
      leaf: -1,
      wildcards: true,
    };
    const accountJwt = (name: string, kp: KeyPair) =>
      encodeAccount(name, kp, { limits }, { signer: operator });
    const [sysJwt, epdJwt, otherJwt] = await Promise.all([
      accountJwt('SYS', system),
      accountJwt('EPD', epd),
      accountJwt('OTHER', other),
    ]);
    creds.encoder = await user('encoder', epd, {
      pub: ['epd.v1.>', '_INBOX.>', '_EPD.>'],
      sub: ['epd.v1.>', '_INBOX.>', '_EPD.>'],
    });
    creds.prefill = await user('prefill', epd, {
      pub: ['epd.v1.wait_metadata', 'epd.v1.has_metadata', 'epd.v1.send', 'epd.v1.release'],
      sub: ['_INBOX.>'],
    });
    creds.client = await user('client', epd, {
      pub: ['epd.v1.encode', 'epd.v1.wait_metadata', 'epd.v1.release'],
      sub: ['_INBOX.>'],
    });
    creds.outsider = await user('outsider', other, { pub: ['>'], sub: ['>'] });
    nats = await NatsServer.start({
      config: [
        `operator: ${operatorJwt}`,
        `system_account: ${system.getPublicKey()}`,
        'resolver: MEMORY',
        'resolver_preload: {',
        `  ${system.getPublicKey()}: ${sysJwt}`,
        `  ${epd.getPublicKey()}: ${epdJwt}`,
        `  ${other.getPublicKey()}: ${otherJwt}`,
        '}',
      ].join('\n'),
    });
    svc = await startServiceProcess({
      EPD_NATS_URL: nats.url,
      EPD_NATS_CREDS: creds.encoder,
      EPD_SUBJECT_PREFIX: 'epd',
    });
  }, 60_000);

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await svc?.stop();
    await nats?.dispose();
  });

  it('serves encode and wait_metadata to users of its account, each with its .creds', async () => {
    const client = await as('client');
    const prefill = await as('prefill');
    const png = dataUri(await image(64, 64, 'png'), 'image/png');
    expect((await call(client, 'encode', encodeBody('creds-1', [png]))).err).toBeUndefined();
    const waited = await call(prefill, 'wait_metadata', { req_id: 'creds-1', timeout_ms: 5000 });
    expect(waited.response).toMatchObject({ req_id: 'creds-1', embedding_dim: 1024 });
  });

  it('refuses what a user’s JWT does not allow: a receiver cannot publish metadata or profile', async () => {
    const prefill = await as('prefill');
    for (const [dp, body] of [
      [
        'publish_metadata',
        { req_id: 'creds-1', metadata: { embedding_size: 4, embedding_len: 1, embedding_dim: 1 } },
      ],
      ['start_profile', {}],
    ] as const) {
      await expect(call(prefill, dp, body)).rejects.toThrow(/permission/i);
    }
    const meta = await call(prefill, 'wait_metadata', { req_id: 'creds-1', timeout_ms: 5000 });
    expect(meta.response).toMatchObject({ embedding_dim: 1024 });
  });

  it('keeps other accounts out: their users see no responder on the same subjects', async () => {
    const outsider = await as('outsider');
    await expect(call(outsider, 'wait_metadata', { req_id: 'creds-1' })).rejects.toThrow(
      /no responders|503/i,
    );
  });

  it('refuses a connection without credentials, and with a user JWT the operator never signed', async () => {
    await expect(connect({ servers: nats.url, reconnect: false })).rejects.toThrow(/authoriz/i);
    const rogueAccount = createAccount();
    const kp = createUser();
    const jwt = await encodeUser('rogue', kp, rogueAccount);
    await expect(
      connect({
        servers: nats.url,
        reconnect: false,
        authenticator: credsAuthenticator(fmtCreds(jwt, kp)),
      }),
    ).rejects.toThrow(/authoriz/i);
  });
});
