import { createHash } from 'node:crypto';
import type { VideoBounds, VisionGeometry } from '../common/vision-geometry';

/** Bump when preprocessing changes a pixel or a sample (resampler, patch layout, mel): old entries then miss. */
export const PREPROCESS_VERSION = 'qwen2vl-bicubic-f32lut-1/whisper-mel-1';

/** The settings that change what an item encodes to, besides its bytes. */
export interface Fingerprint {
  modality: string;
  /** sha256 of the ONNX file that encodes this modality. */
  model: string;
  minPixels: number;
  maxPixels: number;
  maxVideoFrames: number;
  stagingDtype: string;
  /** The patch geometry, when a model directory gives one other than the default. */
  geometry?: VisionGeometry;
  /** Video to a model with a video processor of its own (Qwen3-VL): its bounds. */
  video?: VideoBounds;
  /**
   * The tenant whose request this is (common/tenant.ts): tenants share no entry, neither
   * by content (whose hits would tell one tenant what another encoded) nor by hash.
   */
  tenant?: string;
}

/** A share of a request the cache keeps as one entry: one image, or a whole video or audio request. */
export interface CacheUnit {
  key: string;
  /** Indexes into the request's items, in order. */
  items: number[];
}

const prefixOf = (fp: Fingerprint) => JSON.stringify({ v: PREPROCESS_VERSION, ...fp });

const sha256 = (...parts: (string | Uint8Array)[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
};

/**
 * The content keys of a request: sha256 over the fingerprint and the loaded bytes (never a
 * caller's claim). Images are cached one per item; a video's frames, and an audio
 * request's clips (whose windows are not split per clip), as one unit.
 */
export function cacheUnits(fp: Fingerprint, items: Uint8Array[]): CacheUnit[] {
  const prefix = prefixOf(fp);
  if (fp.modality === 'image') {
    return items.map((bytes, i) => ({ key: sha256(prefix, '\n', bytes), items: [i] }));
  }
  const perItem = items.map((bytes) => sha256(bytes));
  return [{ key: sha256(prefix, '\n', perItem.join(',')), items: items.map((_, i) => i) }];
}

/**
 * Lookup keys from the caller's own hashes (EPD_CACHE_TRUST_CLIENT_HASH), one per unit as
 * cacheUnits cuts them, within `namespace`: never equal to a content key, and never shared
 * between namespaces, models or preprocessing settings.
 */
export function hintKeys(fp: Fingerprint, hints: string[], namespace: string): string[] {
  const prefix = prefixOf(fp);
  const key = (hint: string) => sha256(prefix, '\nclient-hash\n', namespace, '\n', hint);
  return fp.modality === 'image' ? hints.map(key) : [key(hints.join(','))];
}
