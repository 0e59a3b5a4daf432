import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm, StorageType } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl } from './support/app';
import { freshBucket } from './support/kv-registry';
import { runServiceToExit } from './support/service-process';

/**
 * Before, only the metadata and object store buckets checked their settings: a roster or
 * cache claims bucket made by instances with another EPD_INSTANCE_HEARTBEAT_MS,
 * EPD_CACHE_MAX_CLAIMS or history was retried forever ("roster unavailable; retrying")
 * or silently used with the other settings. Every bucket now goes through one opener:
 * a conflict stops the process with exit 78 and a message naming the bucket, each setting
 * that differs and the environment variables that decide it.
 */
describe('every shared bucket refuses conflicting settings (e2e, the built service)', () => {
  // The metadata bucket's own case: registry-shared.e2e-spec.ts; the cache's object
  // bucket's: object-store.e2e-spec.ts. Here the three others.
  let nc: NatsConnection;
  const made: string[] = [];
  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    const jsm = await jetstreamManager(nc);
    for (const s of made) await jsm.streams.delete(s).catch(() => false);
    await nc.close();
  });

  /** Runs the service on `kvBucket` to its exit (in the test configuration): code and output. */
  const runToExit = async (kvBucket: string, env: Record<string, string>) => {
    const { code, out } = await runServiceToExit(
      {
        EPD_SUBJECT_PREFIX: `${kvBucket}x`,
        EPD_REGISTRY_STORE: 'jetstream',
        EPD_KV_BUCKET: kvBucket,
        EPD_LOG_LEVEL: 'error',
        ...env,
      },
      true,
    );
    return { code, stderr: out };
  };

  it('the instance roster: another TTL (three heartbeats) is refused, naming EPD_INSTANCE_HEARTBEAT_MS', async () => {
    const bucket = freshBucket('rosterconf');
    made.push(`KV_${bucket}`, `KV_${bucket}_instances`);
    // As instances with EPD_INSTANCE_HEARTBEAT_MS=1000 made it: a TTL of 3 s.
    await new Kvm(jetstream(nc)).create(`${bucket}_instances`, {
      history: 1,
      ttl: 3000,
      replicas: 1,
    });
    const { code, stderr } = await runToExit(bucket, { EPD_INSTANCE_HEARTBEAT_MS: '500' });
    expect(code).toBe(78);
    expect(stderr).toContain(
      `epd-encoder: KV bucket ${bucket}_instances exists with other settings (ttlMs 3000, want 1500)`,
    );
    expect(stderr).toContain('EPD_INSTANCE_HEARTBEAT_MS');
    expect(stderr).toContain('delete the bucket or use another EPD_KV_BUCKET');
  }, 90_000);

  it('the cache claims: another history is refused, naming EPD_CACHE_MAX_CLAIMS', async () => {
    const bucket = freshBucket('claimsconf');
    made.push(`KV_${bucket}`, `KV_${bucket}_claims`, `KV_${bucket}_instances`);
    await new Kvm(jetstream(nc)).create(`${bucket}_claims`, {
      history: 5,
      ttl: 3_600_000,
      replicas: 1,
    });
    const { code, stderr } = await runToExit(bucket, {
      EPD_CACHE_MAX_BYTES: String(16 * 1024 * 1024),
    });
    expect(code).toBe(78);
    expect(stderr).toContain(`epd-encoder: KV bucket ${bucket}_claims exists with other settings`);
    expect(stderr).toContain('history 5, want 1');
    expect(stderr).toContain('EPD_CACHE_MAX_CLAIMS');
  }, 90_000);

  it("the handoff's staged bucket: another max age (EPD_SEND_TIMEOUT_MS) is refused", async () => {
    const bucket = freshBucket('stagedconf');
    const obj = freshBucket('stagedobj');
    const maxBytes = 64 * 1024 * 1024;
    made.push(`KV_${bucket}`, `KV_${bucket}_instances`, `KV_${bucket}_claims`);
    made.push(`OBJ_${obj}`, `OBJ_${obj}_staged`);
    // As instances with EPD_SEND_TIMEOUT_MS=60000 made it; this one has the default 180 s.
    await new Objm(nc).create(`${obj}_staged`, {
      storage: StorageType.File,
      replicas: 1,
      max_bytes: maxBytes,
      ttl: 60_000 * 1e6,
    });
    const { code, stderr } = await runToExit(bucket, {
      EPD_CACHE_MAX_BYTES: String(16 * 1024 * 1024),
      EPD_CACHE_STORE: 'jetstream',
      EPD_OBJ_BUCKET: obj,
      EPD_OBJ_MAX_BYTES: String(maxBytes),
    });
    expect(code).toBe(78);
    expect(stderr).toContain(
      `epd-encoder: object store bucket ${obj}_staged exists with other settings (maxAgeMs 60000, want 180000)`,
    );
    expect(stderr).toContain('EPD_SEND_TIMEOUT_MS');
    expect(stderr).toContain('delete the bucket or use another EPD_OBJ_BUCKET');
  }, 90_000);
});
