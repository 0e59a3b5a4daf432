import { createHash } from 'node:crypto';
import { Base64UrlPaddedCodec } from '@nats-io/obj';
import type { StagingDtype, VideoTiming } from '../common/kernel';

/**
 * How the object store tier lays an embedding out in a JetStream Object Store: the
 * Object Store's own layout (chunks on `$O.<bucket>.C.<nuid>`, a JSON metadata message on
 * `$O.<bucket>.M.<base64url name>`), with our fields in the metadata.
 */

/** Bumped when the object layout changes: objects of another version are misses. */
const LAYOUT = '1';

/** Rows with the fields that say how to read them, as stored. */
export interface StoredRows {
  data: Float32Array | Uint16Array;
  tokens: number;
  dim: number;
  dtype: StagingDtype;
  grid: number[][];
  bytes: number;
  /** A handed-off video's timing (the cache's entries carry none: it is the request's). */
  timing?: VideoTiming;
}

/**
 * The size of an object's chunks: 512 KiB, or less when the server's max_payload is
 * smaller (headers aside). Measured on loopback (nats.js and nats-server 2.9), a 1 MiB
 * object read as two 512 KiB chunks asked at once took 2.8 ms, as ~1 MiB chunks 8 ms, as
 * 128 KiB ones (the library's default) 11 ms.
 */
export function chunkBytesFor(maxPayload: number): number {
  return Math.max(64 * 1024, Math.min(512 * 1024, maxPayload - 64 * 1024));
}

/** A bucket's stream, and the subjects of an object's metadata and chunks (the Object Store's layout). */
export const streamOf = (bucket: string) => `OBJ_${bucket}`;
export const metaSubjectOf = (bucket: string, name: string) =>
  `$O.${bucket}.M.${Base64UrlPaddedCodec.encode(name)}`;
export const chunkSubjectOf = (bucket: string, nuid: string) => `$O.${bucket}.C.${nuid}`;
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
/** The sha256 of rows' bytes: the object's digest, and the checksum in its metadata. */
export const digestOf = (bytes: Uint8Array): Buffer => createHash('sha256').update(bytes).digest();
export const bytesOf = (rows: Float32Array | Uint16Array) =>
  new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength);
const DTYPE_BYTES: Record<StagingDtype, number> = { float32: 4, bfloat16: 2, float16: 2 };

/** The object's metadata: every field needed to trust and read its bytes (`digest`: their sha256). */
export function objectMetadata(
  rows: StoredRows,
  digest: Buffer,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    layout: LAYOUT,
    tokens: String(rows.tokens),
    dim: String(rows.dim),
    dtype: rows.dtype,
    grid: JSON.stringify(rows.grid),
    ...(rows.timing ? { timing: JSON.stringify(rows.timing) } : {}),
    sha256: digest.toString('hex'),
    ...extra,
  };
}

/**
 * Rows from an object's bytes and metadata, or undefined when anything disagrees: layout,
 * dtype, sizes, or the checksum of the bytes themselves (a corrupt or foreign object).
 */
export function rowsOfObject(
  bytes: Uint8Array,
  meta: Record<string, string> | undefined,
  dtype: StagingDtype,
  owned = false,
): StoredRows | undefined {
  if (!meta || meta.layout !== LAYOUT || meta.dtype !== dtype) return undefined;
  const tokens = Number(meta.tokens);
  const dim = Number(meta.dim);
  if (!Number.isInteger(tokens) || !Number.isInteger(dim) || tokens <= 0 || dim <= 0) return;
  if (bytes.byteLength !== tokens * dim * DTYPE_BYTES[dtype]) return undefined;
  if (meta.sha256 !== sha256(bytes)) return undefined;
  let grid: number[][];
  try {
    grid = JSON.parse(meta.grid ?? '') as number[][];
  } catch {
    return undefined;
  }
  if (!Array.isArray(grid)) return undefined;
  const timing = meta.timing === undefined ? undefined : timingOf(meta.timing);
  if (timing === null) return undefined;
  // A buffer of our own (`owned`: the caller's, whole), else a copy: aligned for the typed
  // array, and not a view of the client's buffers.
  let own: ArrayBuffer;
  if (owned && bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.byteLength) {
    own = bytes.buffer as ArrayBuffer;
  } else {
    own = new ArrayBuffer(bytes.byteLength);
    new Uint8Array(own).set(bytes);
  }
  const data = dtype === 'float32' ? new Float32Array(own) : new Uint16Array(own);
  return { data, tokens, dim, dtype, grid, bytes: bytes.byteLength, ...(timing ? { timing } : {}) };
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** A stored timing, or null when it is not one (the object is then refused as foreign). */
function timingOf(text: string): VideoTiming | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { second_per_grid_ts: s, video_timestamps: v } = value as Record<string, unknown>;
  if (s !== undefined && !(Array.isArray(s) && s.every(finite))) return null;
  if (
    v !== undefined &&
    !(Array.isArray(v) && v.every((l) => Array.isArray(l) && (l as unknown[]).every(finite)))
  )
    return null;
  return {
    ...(s !== undefined ? { second_per_grid_ts: s } : {}),
    ...(v !== undefined ? { video_timestamps: v as number[][] } : {}),
  };
}
