import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { natsCall, waitFor } from './support/calls';
import { freshBucket } from './support/kv-registry';

/**
 * N8 (security, second pass), kv-bucket-deleted: without roles, anyone on the account can
 * delete the shared registry's bucket. Deleting `KV_epd_meta` left every publish_metadata
 * at 503 "jetstream is not enabled" (misleading) and /health/ready at 503 until a restart.
 * The service recreates the bucket with its own settings, says so, and serves again.
 */
describe('N8: the shared registry bucket deleted under a running service (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  const bucket = freshBucket('n8');
  beforeAll(async () => {
    t = await startTestApp({ EPD_REGISTRY_STORE: 'jetstream', EPD_KV_BUCKET: bucket });
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    await nc.drain();
    await t.close();
  });

  const publish = (reqId: string) =>
    natsCall(nc, t, 'publish_metadata', {
      req_id: reqId,
      metadata: { embedding_size: 16, embedding_len: 1, embedding_dim: 4 },
    });

  it('recreates the bucket, and publish, wait and readiness work again', async () => {
    expect((await publish('before')).err).toBeUndefined();
    const jsm = await jetstreamManager(nc);
    expect(await jsm.streams.delete(`KV_${bucket}`)).toBe(true);

    // At most a few calls are refused meanwhile, each saying what is wrong.
    const refusals: string[] = [];
    await waitFor(
      async () => {
        const r = await publish(`after-${refusals.length}`);
        if (r.err) refusals.push(`${r.err.code} ${r.err.message}`);
        return r.err === undefined;
      },
      10_000,
      100,
      () => `refused: ${refusals.length}, the last: ${refusals.slice(-2).join(' / ')}`,
    );
    for (const r of refusals) expect(r).toMatch(/^503 .*KV bucket .* (was deleted|not open)/);
    const wait = await natsCall(nc, t, 'wait_metadata', {
      req_id: `after-${refusals.length}`,
      timeout_ms: 2000,
    });
    expect(wait.response).toMatchObject({ embedding_len: 1 });
    await waitFor(
      async () => (await fetch(`${t.httpUrl}/health/ready`)).status === 200,
      10_000,
      100,
    );
    // With the settings it had (the TTL is the service's).
    const info = await jsm.streams.info(`KV_${bucket}`);
    expect(Math.round(info.config.max_age / 1e6)).toBe(t.config.timeouts.sendTimeoutMs);
  }, 60_000);
});
