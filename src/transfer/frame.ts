import type { StagingDtype } from '../common/kernel';
/**
 * The data-plane frame (docs/contract.md §5): a 4-byte big-endian header length, a JSON header,
 * then `byte_length` raw little-endian bytes. The receiver answers each frame with one
 * JSON line: `{"req_id", "ok": true}` or `{"ok": false, "error"}`.
 */
/** The dtypes a frame carries: the staging dtypes. */
export type WireDtype = StagingDtype;

export const WIRE_DTYPES: readonly WireDtype[] = ['float32', 'float16', 'bfloat16'];

const isWireDtype = (d: unknown): d is WireDtype => WIRE_DTYPES.includes(d as WireDtype);

export interface FrameHeader {
  req_id: string;
  part_idx: number;
  num_parts: number;
  shape: number[];
  dtype: WireDtype;
  byte_length: number;
  session_id: string | null;
  buffer_address: string | number | null;
  /** `image`, `video` or `audio`. */
  modality?: string;
  /** Per item: `[t, h, w]` (in patches) for images and video, `[feature_len]` for audio. */
  grid_thw?: number[][];
  /** Video to Qwen2.5-VL: seconds per temporal grid step, one per video. */
  second_per_grid_ts?: number[];
  /** Video to Qwen3-VL: seconds of each temporal patch, one list per video. */
  video_timestamps?: number[][];
  error_msg?: string;
  error_code?: number;
}

export interface Ack {
  req_id?: string;
  ok: boolean;
  error?: string;
}

export const DTYPE_BYTES: Readonly<Record<WireDtype, number>> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
};

/** Refuse absurd headers before allocating anything for them. */
export const MAX_HEADER_BYTES = 64 * 1024;

export function encodeHeader(header: FrameHeader): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.allocUnsafe(4 + json.length);
  out.writeUInt32BE(json.length, 0);
  json.copy(out, 4);
  return out;
}

/** Why a header is not acceptable, or undefined when it is. */
export function validateHeader(h: unknown): string | undefined {
  if (typeof h !== 'object' || h === null) return 'header is not a JSON object';
  const f = h as Partial<FrameHeader>;
  if (typeof f.req_id !== 'string' || !f.req_id) return 'header.req_id must be a non-empty string';
  if (!Array.isArray(f.shape) || !f.shape.every((d) => Number.isInteger(d) && d >= 0)) {
    return 'header.shape must be a list of non-negative integers';
  }
  if (!isWireDtype(f.dtype)) return `unsupported dtype ${String(f.dtype)}`;
  if (!Number.isInteger(f.byte_length) || (f.byte_length ?? -1) < 0)
    return 'header.byte_length must be a non-negative integer';
  const expected = f.shape.reduce((n, d) => n * d, 1) * DTYPE_BYTES[f.dtype];
  if (f.error_msg === undefined && expected !== f.byte_length) {
    return `byte_length ${f.byte_length} does not match shape [${f.shape.join(', ')}] of ${f.dtype} (${expected} bytes)`;
  }
  return undefined;
}
