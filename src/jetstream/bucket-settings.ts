import type { Logger } from '@nestjs/common';
import {
  jetstream,
  jetstreamManager,
  type JetStreamManager,
  type StreamInfo,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { KvBucket } from './kv-bucket';
import { Objm, StorageType } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { backoffMs, sleep } from '../common/backoff';

/** A bucket that cannot be used with this configuration: the process refuses to start (78). */
export class StoreConfigError extends Error {}

/**
 * The one backoff of every bucket's open and recreation: 200 ms doubling to 5 s, half
 * jitter (NATS may be up before JetStream, or not yet at all).
 */
export const BUCKET_BACKOFF = { baseMs: 200, maxMs: 5_000, jitter: 0.5 } as const;

/** The bound of one JetStream API call made while opening a bucket. */
const API_TIMEOUT_MS = 5_000;

/**
 * The settings of an existing bucket that differ from ours, as `name have, want ours`
 * joined by `; `, or undefined when they all agree.
 */
export function settingsMismatch<K extends string>(
  have: Record<K, unknown>,
  want: Record<K, unknown>,
): string | undefined {
  const wrong = (Object.keys(want) as K[]).filter((k) => have[k] !== want[k]);
  if (wrong.length === 0) return undefined;
  return wrong.map((k) => `${k} ${String(have[k])}, want ${String(want[k])}`).join('; ');
}

/** A KV bucket as this service makes it, and what an operator changes when one differs. */
export interface KvBucketSpec {
  bucket: string;
  ttlMs: number;
  replicas: number;
  history: number;
  /** A cap on its entries (set on the stream: KV options have none). */
  maxEntries?: number;
  /** The settings that decide the values above, named in a conflict's message. */
  settings: string;
  /** What it is, for the log ("metadata", "instance roster", "cache claims"). */
  what: string;
}

/** Whether `err` is JetStream's answer about a stream that does not exist. */
export function streamNotFound(err: unknown): boolean {
  return /stream not found/i.test((err as Error).message);
}

/** Stream `stream`'s info, or undefined when it does not exist (any other error thrown). */
function streamInfo(jsm: JetStreamManager, stream: string): Promise<StreamInfo | undefined> {
  return jsm.streams.info(stream).catch((err: unknown) => {
    if (streamNotFound(err)) return undefined;
    throw err;
  });
}

/**
 * Opens `spec.bucket`, creating it with `spec`'s settings when it is missing (a peer that
 * creates it at the same moment wins as well); then it must have them, or a
 * StoreConfigError names each that differs, the settings that decide them, and the way
 * out. A bucket without its cap was just created, here or by a peer (between its two
 * steps): it is capped, not taken for a conflicting one. `created`: this call made it.
 */
export async function openKvBucket(
  nc: NatsConnection,
  spec: KvBucketSpec,
): Promise<{ kv: KvBucket; created: boolean }> {
  const js = jetstream(nc, { timeout: API_TIMEOUT_MS });
  const jsm = await jetstreamManager(nc, { timeout: API_TIMEOUT_MS });
  const stream = `KV_${spec.bucket}`;
  let info = await streamInfo(jsm, stream);
  let created = false;
  if (!info) {
    await new Kvm(js)
      .create(spec.bucket, { history: spec.history, ttl: spec.ttlMs, replicas: spec.replicas })
      .then(
        () => (created = true),
        async (err: unknown) => {
          if (!(await streamInfo(jsm, stream))) throw err; // not made by a peer either
        },
      );
    info = await streamInfo(jsm, stream);
    if (!info) throw new Error(`KV bucket ${spec.bucket} vanished while it was opened`);
  }
  const c = info.config;
  const uncapped = spec.maxEntries !== undefined && c.max_msgs === -1;
  const have: Record<string, number> = {
    ttlMs: Math.round(c.max_age / 1e6),
    replicas: c.num_replicas,
    history: c.max_msgs_per_subject,
  };
  const want: Record<string, number> = {
    ttlMs: spec.ttlMs,
    replicas: spec.replicas,
    history: spec.history,
  };
  if (spec.maxEntries !== undefined) {
    have.maxEntries = uncapped ? spec.maxEntries : c.max_msgs;
    want.maxEntries = spec.maxEntries;
  }
  const wrong = settingsMismatch(have, want);
  if (wrong) {
    throw new StoreConfigError(
      `KV bucket ${spec.bucket} exists with other settings (${wrong}): the ${spec.what}'s ` +
        `${spec.settings} must match every instance sharing it; delete the bucket or use ` +
        `another EPD_KV_BUCKET`,
    );
  }
  if (uncapped) await jsm.streams.update(stream, { ...c, max_msgs: spec.maxEntries });
  // Bound with the stream's own allow_direct: Kvm.open alone binds without it, and every
  // get then went to the stream's leader; with the leader dead, a release waited for the
  // election (cluster failover test) where a direct get from any replica answers at once.
  const kv = await new Kvm(js).open(spec.bucket, { allow_direct: c.allow_direct === true });
  return { kv: new KvBucket(spec.bucket, kv, jsm), created };
}

/** An object store bucket as this service makes it (file storage). */
export interface ObjectBucketSpec {
  bucket: string;
  /** Its stream's name (`OBJ_<bucket>`). */
  stream: string;
  maxAgeMs: number;
  maxBytes: number;
  replicas: number;
  /** The settings that decide the values above, named in a conflict's message. */
  settings: string;
}

/**
 * Opens object store bucket `spec.bucket`, creating it with `spec`'s settings when it is
 * missing; an existing one must have them (StoreConfigError otherwise, naming each that
 * differs). Whether this call created it.
 */
export async function openObjectBucket(
  nc: NatsConnection,
  jsm: JetStreamManager,
  spec: ObjectBucketSpec,
): Promise<boolean> {
  const existing = await streamInfo(jsm, spec.stream);
  if (existing) {
    const c = existing.config;
    const have = {
      maxBytes: c.max_bytes,
      maxAgeMs: Math.round(c.max_age / 1e6),
      replicas: c.num_replicas,
    };
    const want = { maxBytes: spec.maxBytes, maxAgeMs: spec.maxAgeMs, replicas: spec.replicas };
    const wrong = settingsMismatch(have, want);
    if (wrong) {
      throw new StoreConfigError(
        `object store bucket ${spec.bucket} exists with other settings (${wrong}): ` +
          `${spec.settings} must match every instance sharing it; delete the bucket or use ` +
          `another EPD_OBJ_BUCKET`,
      );
    }
  }
  await new Objm(nc).create(spec.bucket, {
    storage: StorageType.File,
    replicas: spec.replicas,
    max_bytes: spec.maxBytes,
    ttl: spec.maxAgeMs * 1e6,
  });
  return !existing;
}

/**
 * Runs `open` until it succeeds, with BUCKET_BACKOFF between attempts. A
 * StoreConfigError is final and thrown; `undefined` once `signal` aborts (shutdown).
 */
export async function untilOpen<T>(
  open: () => Promise<T>,
  what: { bucket: string; logger: Logger; signal: AbortSignal },
): Promise<T | undefined> {
  for (let attempt = 1; !what.signal.aborted; attempt++) {
    try {
      return await open();
    } catch (err) {
      if (err instanceof StoreConfigError) throw err;
      if (what.signal.aborted) return undefined;
      const delay = backoffMs(attempt, BUCKET_BACKOFF);
      what.logger.warn(
        { bucket: what.bucket, err: (err as Error).message, retryInMs: delay },
        'cannot open the bucket yet; retrying',
      );
      await sleep(delay, what.signal).catch(() => undefined);
    }
  }
  return undefined;
}
