import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { CacheStats } from '../src/cache/embedding-cache';
import type { ObjectTierStats } from '../src/cache/object-tier';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor, type Reply } from './support/calls';
import { freshBucket } from './support/kv-registry';
import { dataUri, image } from './support/media';
import { instanceStarter, type Instance } from './support/service-process';

/**
 * M14: after a deletion only the metadata bucket was recreated. With the roster, the cache
 * claims and both object store buckets deleted under a running instance, their writes
 * failed for good and /health/ready stayed 200. Each bucket is now recreated with the
 * service's settings once a use of it finds it gone, the recreation is counted per bucket
 * in /health/ready's detail, and the service works as before.
 */
describe('M14: every shared bucket deleted under a running instance (e2e, jetstream)', () => {
  const prefix = uniquePrefix();
  const kvBucket = freshBucket('m14');
  const objBucket = freshBucket('m14obj');
  const started: Instance[] = [];
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const start = instanceStarter(
    {
      prefix,
      kvBucket,
      natsUrl: sharedNatsUrl(),
      env: {
        EPD_CACHE_MAX_BYTES: String(64 * 1024 * 1024),
        EPD_CACHE_STORE: 'jetstream',
        EPD_OBJ_BUCKET: objBucket,
        EPD_OBJ_MAX_BYTES: String(256 * 1024 * 1024),
      },
    },
    started,
  );
  const streams = [
    `KV_${kvBucket}_instances`,
    `KV_${kvBucket}_claims`,
    `OBJ_${objBucket}`,
    `OBJ_${objBucket}_staged`,
  ];
  const exists = (stream: string) =>
    jsm.streams.info(stream).then(
      () => true,
      () => false,
    );

  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await Promise.all(started.map((i) => i.svc.stop()));
    for (const s of [...streams, `KV_${kvBucket}`]) await jsm.streams.delete(s).catch(() => false);
    await nc.close();
  });

  it('recreates the roster, claims and object store buckets, says so in /health/ready, and caches again', async () => {
    const a = await start('m14a');
    const encode = async (reqId: string, seed: number) =>
      (
        await nc.request(
          `${prefix}.v1.encode`,
          JSON.stringify(
            encodeBody(reqId, [
              dataUri(await image(64, 64, 'png', { r: seed, g: 3, b: 9 }), 'image/png'),
            ]),
          ),
          { timeout: 30_000 },
        )
      ).json<Reply>();
    const objectStore = async () =>
      (
        (await (await fetch(`${a.svc.url}/admin/cache`)).json()) as CacheStats & {
          object_store: ObjectTierStats;
        }
      ).object_store;

    expect((await encode('m14-before', 1)).err).toBeUndefined();
    await waitFor(async () => (await objectStore()).writes.ok >= 1, 10_000, 50);
    for (const s of streams)
      await waitFor(
        () => exists(s),
        10_000,
        50,
        () => `${s} never made`,
      );

    for (const s of streams) expect(await jsm.streams.delete(s)).toBe(true);

    // Uses of each: heartbeats (every 500 ms), an encode (its claim, its cache write).
    let n = 0;
    let missing: string[] = [];
    await waitFor(
      async () => {
        await encode(`m14-after-${++n}`, 10 + n);
        missing = [];
        for (const s of streams) if (!(await exists(s))) missing.push(s);
        return missing.length === 0;
      },
      20_000,
      200,
      () => `still missing after ${n} encodes: ${missing.join(', ')}`,
    );

    // The cache writes again, to the recreated bucket.
    const ok = (await objectStore()).writes.ok;
    expect((await encode('m14-later', 99)).err).toBeUndefined();
    await waitFor(
      async () => (await objectStore()).writes.ok > ok,
      10_000,
      50,
      () => 'no cache write landed in the recreated object store',
    );
    const ready = await fetch(`${a.svc.url}/health/ready`);
    expect(ready.status).toBe(200);
    const detail = ((await ready.json()) as { details: Record<string, unknown> }).details;
    expect(detail.buckets).toMatchObject({
      status: 'up',
      recreated: {
        [`${kvBucket}_instances`]: expect.any(Number),
        [`${kvBucket}_claims`]: expect.any(Number),
        [objBucket]: expect.any(Number),
        [`${objBucket}_staged`]: expect.any(Number),
      },
    });
    // The recreated roster holds this instance's heartbeat again.
    const roster = await new Kvm(nc).open(`${kvBucket}_instances`);
    await waitFor(
      async () => (await roster.get(a.id))?.operation === 'PUT',
      10_000,
      100,
      () => 'this instance is not in the recreated roster',
    );
  }, 90_000);
});
