import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { HandoffStats } from '../src/handoff/embedding-handoff.service';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, type Reply } from './support/calls';
import { freshBucket } from './support/kv-registry';
import { dataUri, image } from './support/media';
import { instanceStarter, type Instance } from './support/service-process';

/**
 * Who holds an embedding after its owner went away, when calls for it race.
 *
 * - M7: an instance handed its staged embeddings to the cluster at shutdown, and calls for
 *   one reached two instances at once: both took it over (two copies), and the copy the
 *   owner record did not name was still delivered after the other had released it. A
 *   takeover is now a compare-and-set of the owner record: one instance wins, the other
 *   forwards to it.
 * - An owner that crashed and came back with the same instance id: a call that reached it
 *   directly was told `embedding_lost`, but one a peer forwarded there skipped that check
 *   and was told `already_released`. Both routes now answer `embedding_lost`.
 */
describe('takeover and restarted owners, with calls racing (e2e, jetstream)', () => {
  const prefix = uniquePrefix();
  const kvBucket = freshBucket('to');
  const objBucket = freshBucket('toobj');
  const started: Instance[] = [];
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  const delivered = new Map<string, number>();

  const start = instanceStarter(
    {
      prefix,
      kvBucket,
      natsUrl: sharedNatsUrl(),
      env: {
        EPD_CACHE_STORE: 'jetstream',
        EPD_OBJ_BUCKET: objBucket,
        EPD_OBJ_MAX_BYTES: String(256 * 1024 * 1024),
      },
    },
    started,
  );
  const call = async (subject: string, data: unknown): Promise<Reply> =>
    (await nc.request(subject, JSON.stringify(data), { timeout: 30_000 })).json<Reply>();
  const queue = (dp: string, data: unknown) => call(`${prefix}.v1.${dp}`, data);
  const encodeOn = (inst: Instance, reqId: string, items: string[]) =>
    call(`${prefix}.v1.inst.${inst.id}.encode`, encodeBody(reqId, items));
  const send = (reqId: string) =>
    queue('send', {
      req_id: reqId,
      prefill_host: '127.0.0.1',
      embedding_port: rx.port,
      timeout_ms: 5000,
    });
  const handoff = async (inst: Instance) =>
    (await (await fetch(`${inst.svc.url}/admin/handoff`)).json()) as HandoffStats;
  const stop = async (inst: Instance) => {
    await inst.svc.stop();
    started.splice(started.indexOf(inst), 1);
  };

  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header }) =>
        void delivered.set(header.req_id, (delivered.get(header.req_id) ?? 0) + 1),
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(started.map((i) => i.svc.stop()));
    await rx.close();
    const jsm = await jetstreamManager(nc);
    for (const b of [objBucket, `${objBucket}_staged`])
      await jsm.streams.delete(`OBJ_${b}`).catch(() => undefined);
    await nc.close();
  });

  it('M7: a handed-off embedding that calls reach on two instances at once is taken over once, and nothing is delivered after its release', async () => {
    const a = await start('toa');
    const b = await start('tob');
    const c = await start('toc', { EPD_LOG_LEVEL: 'info' });
    const png = dataUri(await image(56, 56, 'png', { r: 9, g: 80, b: 200 }), 'image/png');
    const ids = Array.from({ length: 12 }, (_, i) => `race-${i}`);
    for (const r of ids) expect((await encodeOn(c, r, [png])).err).toBeUndefined();
    await stop(c); // hands all 12 to the cluster
    expect(c.svc.output()).toMatch(/handed 12 staged embedding/);

    // Eight concurrent status calls per req_id through the queue group: A and B both get some.
    const statuses = await Promise.all(
      ids.flatMap((r) =>
        Array.from({ length: 8 }, () => queue('send_status', { req_id: r }).then((x) => x.err)),
      ),
    );
    // Every one answered: the loser of a takeover forwards to the winner.
    expect(statuses.filter((e) => e !== undefined)).toEqual([]);
    const taken = (await handoff(a)).taken + (await handoff(b)).taken;
    // Before: both instances took most of them (up to 24 takeovers for 12 embeddings).
    expect(taken).toBe(ids.length);

    // Released once: no instance may deliver it afterwards.
    for (const r of ids) expect((await queue('release', { req_id: r })).err).toBeUndefined();
    const after = await Promise.all(
      ids.flatMap((r) => Array.from({ length: 4 }, () => send(r).then((x) => x.err?.type))),
    );
    // Released: a send is refused (already_released), never delivered.
    expect(after.filter((t) => t !== 'already_released')).toEqual([]);
    expect(ids.filter((r) => delivered.has(r))).toEqual([]);
    await stop(a);
    await stop(b);
  }, 120_000);

  it('an owner restarted with the same instance id answers embedding_lost on the forwarded route too', async () => {
    const a = await start('tra');
    const b = await start('trb');
    const png = dataUri(await image(56, 56, 'png', { r: 30, g: 1, b: 7 }), 'image/png');
    const ids = Array.from({ length: 6 }, (_, i) => `crash-${i}`);
    for (const r of ids) expect((await encodeOn(a, r, [png])).err).toBeUndefined();
    // A crashes (no drain, no handoff) and comes back under the same instance id.
    const gone = new Promise<void>((r) => a.svc.proc.once('exit', () => r()));
    a.svc.proc.kill('SIGKILL');
    await gone;
    await stop(a); // already exited: only forgets it
    const a2 = await start('tra');
    expect(a2.id).toBe(a.id);

    // Through the queue group: on B, forwarded to the new A by the owner record; on A, direct.
    const routed = await Promise.all(
      ids.flatMap((r) => Array.from({ length: 4 }, () => send(r).then((x) => x.err?.type))),
    );
    // Before: the calls B forwarded to the new A were answered already_released.
    expect(routed.filter((t) => t !== 'embedding_lost')).toEqual([]);
    expect(ids.filter((r) => delivered.has(r))).toEqual([]);
    await stop(a2);
    await stop(b);
  }, 120_000);
});
