import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor, type Reply } from './support/calls';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehind, namesLoss } from './support/ledger';
import { dataUri, image } from './support/media';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * restart-forgets-staged-embeddings: with the memory store (the default), a service that
 * crashed or restarted knew nothing of the req_ids its predecessor held. A `send` for one
 * was told "no staged embedding … (already released)", a registration waited its whole
 * deadline, and a receiver that had allocated for the rows waited for them in vain
 * (reproduced at 06cf683, single process and DP supervisor alike). The restart ledger now
 * tells every call for them that the embedding was lost, and a new encode of the same
 * req_id works as before. Whole-process crash (SIGKILL), then a new process on the same
 * ledger; for DP, the supervisor and its workers all go.
 */
describe.each([
  ['one process', {}],
  ['DP supervisor with 2 workers', { EPD_DP_SIZE: '2' }],
])('restart honesty with the memory store, %s (e2e)', (name, extra: Record<string, string>) => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-ledger-'));
  const ledger = join(dir, 'staged.json');
  const prefix = uniquePrefix();
  const env = {
    EPD_NATS_URL: sharedNatsUrl(),
    EPD_SUBJECT_PREFIX: prefix,
    EPD_RESTART_LEDGER: ledger,
    ...extra,
  };
  let nc: NatsConnection;
  let svc: ServiceProcess | undefined;
  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    await svc?.stop();
    await nc.drain();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (dp: string, body: object) =>
    (
      await nc.request(`${prefix}.v1.${dp}`, JSON.stringify(body), { timeout: 20_000 })
    ).json<Reply>();

  /** A send to a port nobody listens on: only its refusal matters here. */
  const sendTo9 = (reqId: string, timeoutMs: number) =>
    call('send', {
      req_id: reqId,
      prefill_host: '127.0.0.1',
      embedding_port: 9,
      timeout_ms: timeoutMs,
    });

  it('tells every call for an embedding the crashed process held that it was lost', async () => {
    svc = await startServiceProcess(env);
    const png = dataUri(await image(56, 56), 'image/png');
    const encoded = await call('encode', encodeBody('held', [png]));
    expect(encoded.response).toMatchObject({ req_id: 'held', embedding_len: 4 });
    // Released before the crash: not lost, and not named as such.
    await call('encode', encodeBody('freed', [png]));
    await call('release', { req_id: 'freed' });
    // Metadata another party published here names no embedding of ours: not in the ledger.
    const foreign = await call('publish_metadata', {
      req_id: 'foreign',
      metadata: { embedding_size: 16, embedding_len: 1, embedding_dim: 4 },
    });
    expect(foreign.err).toBeUndefined();
    expect(
      await waitFor(() => {
        if (!existsSync(ledger)) return false;
        const ids = (JSON.parse(readFileSync(ledger, 'utf8')) as { entries: [string][] }).entries;
        const has = (reqId: string) => ids.some(([id]) => id === reqId);
        return has('held') && !has('freed') && !has('foreign');
      }),
    ).toBe(true);
    svc.proc.kill('SIGKILL');
    await waitFor(() => svc!.proc.exitCode !== null || svc!.proc.signalCode !== null);
    svc = await startServiceProcess(env);

    const lost = /^staged embedding for req_id=held was lost \(encoder restarted\)$/;
    const calls = new CallLedger();
    calls.markFault();
    const wait = await calls.nats('wait_metadata', 5000, () =>
      call('wait_metadata', { req_id: 'held', timeout_ms: 5000 }),
    );
    expect(wait?.err).toMatchObject({ code: 500 });
    expect(wait?.err?.message).toMatch(lost);
    const started = Date.now();
    const send = await calls.nats('send', 5000, () => sendTo9('held', 5000));
    const register = await calls.nats('register_destinations', 5000, () =>
      call('register_destinations', {
        req_id: 'held',
        receive_url: '127.0.0.1:9',
        receive_count: 1,
        timeout_ms: 5000,
      }),
    );
    for (const r of [send, register]) {
      expect(r?.err).toMatchObject({ code: 503, type: 'embedding_lost' });
      expect(r?.err?.message).toMatch(lost);
    }
    // N10 (security, second pass): has_metadata agrees with send (it said present: true).
    const has = await calls.nats('has_metadata', 5000, () =>
      call('has_metadata', { req_id: 'held' }),
    );
    expect(has?.response).toEqual({ req_id: 'held', present: false });
    // At once, not at the 5 s deadline.
    expect(Date.now() - started).toBeLessThan(2000);
    // What was released before the crash is still just released.
    const freed = await sendTo9('freed', 1000);
    expect(String(freed.err?.message)).not.toMatch(/was lost/);

    // The req_id encoded again after the restart is served as usual.
    const again = await call('encode', encodeBody('held', [png]));
    expect(again.response).toMatchObject({ req_id: 'held', embedding_len: 4 });
    const meta = await call('wait_metadata', { req_id: 'held', timeout_ms: 5000 });
    expect(meta.response).toMatchObject({ embedding_len: 4 });
    await call('release', { req_id: 'held' });
    recordFault(`restart-memory-store${extra.EPD_DP_SIZE ? '-dp' : ''}`, {
      fault: `whole-process crash (SIGKILL) and restart, memory store (${name})`,
      ledger: calls,
      // 'held' was acked before the crash: every later call for it must name the loss.
      // has_metadata must not offer it either.
      silentlyLost:
        [wait, send, register].some((r) => !namesLoss(r)) || has?.response?.present !== false
          ? 1
          : 0,
      leftBehind: await leftBehind(svc.url, ['held', 'freed', 'foreign']),
    });
  });
});
