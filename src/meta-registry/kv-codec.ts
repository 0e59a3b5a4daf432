import type { StoredMeta } from './meta-store';
import { metaPayloadSchema } from './meta.schema';

/**
 * req_id ↔ KV key. KV keys allow only `[-/_=.a-zA-Z0-9]` and no leading or trailing dot,
 * but a req_id may hold anything (spaces, `*`, `>`, unicode, 512 characters). So:
 * - an id of plain characters (letters, digits, `_`, `-`; up to 256) keeps its text, as
 *   `i.<req_id>`, readable with `nats kv get`;
 * - any other id is `b.<base64url of its UTF-8>`.
 * The two prefixes cannot collide, and both map back exactly (reqIdOf).
 */
const PLAIN = /^[A-Za-z0-9_-]{1,256}$/;

export function keyOf(reqId: string): string {
  return PLAIN.test(reqId) ? `i.${reqId}` : `b.${Buffer.from(reqId, 'utf8').toString('base64url')}`;
}

/** The req_id of a key, or undefined for a key this codec did not make. */
export function reqIdOf(key: string): string | undefined {
  if (key.startsWith('i.')) return key.slice(2);
  if (key.startsWith('b.')) return Buffer.from(key.slice(2), 'base64url').toString('utf8');
  return undefined;
}

interface Wire {
  part_idx?: number;
  metadata: unknown;
  published_at: number;
  owner?: { instance: string; rank?: number; pid?: number; boot?: string; store?: string };
}

export function encodeRecord(record: StoredMeta): string {
  const wire: Wire = {
    part_idx: record.partIdx,
    metadata: record.metadata,
    published_at: record.publishedAt,
    owner: record.owner,
  };
  return JSON.stringify(wire);
}

/** The record of a KV value, or undefined if it is not one (never trusted blindly). */
export function decodeRecord(reqId: string, value: Uint8Array): StoredMeta | undefined {
  let wire: Wire;
  try {
    wire = JSON.parse(Buffer.from(value).toString('utf8')) as Wire;
  } catch {
    return undefined;
  }
  const metadata = metaPayloadSchema.safeParse(wire?.metadata);
  if (!metadata.success || typeof wire.published_at !== 'number') return undefined;
  const owner =
    wire.owner && typeof wire.owner.instance === 'string'
      ? {
          instance: wire.owner.instance,
          ...(typeof wire.owner.rank === 'number' ? { rank: wire.owner.rank } : {}),
          ...(typeof wire.owner.pid === 'number' ? { pid: wire.owner.pid } : {}),
          ...(typeof wire.owner.boot === 'string' ? { boot: wire.owner.boot } : {}),
          ...(typeof wire.owner.store === 'string' ? { store: wire.owner.store } : {}),
        }
      : undefined;
  return {
    reqId,
    partIdx: typeof wire.part_idx === 'number' ? wire.part_idx : undefined,
    metadata: metadata.data,
    publishedAt: wire.published_at,
    ...(owner ? { owner } : {}),
  };
}
