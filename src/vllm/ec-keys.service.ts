import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import type { MediaItem } from '../media/media-item';
import { MediaLoader } from '../media/media-loader.service';
import type { MediaPart } from './chat-request.schema';
import { mmHash, unsafeKeyReason } from './ec-keys';

/** A part's key under the EC path, and the item the pipeline loads for it. */
export interface KeyedPart extends MediaPart {
  key: string;
  /** How the key was found: the caller's uuid, or vLLM's mm_hash computed here. */
  keyFrom: 'uuid' | 'mm_hash';
  item: MediaItem;
}

/**
 * Whether PIL opens these bytes in a mode other than RGB, so that vLLM converts the image
 * (and its mm_hash carries the conversion's io_config): palette, grey, grey + alpha, RGBA,
 * CMYK. Read from the header (sharp's metadata); RGB with 8 or 16 bits per channel is
 * opened as RGB. One case can differ from PIL: an RGB PNG with a tRNS colour key, which
 * libvips reports with an alpha channel and PIL opens as RGB.
 */
async function convertedByVllm(bytes: Buffer): Promise<boolean> {
  const meta = await sharp(bytes, { animated: false }).metadata();
  if (meta.format === 'gif') return true;
  return meta.isPalette === true || meta.channels !== 3;
}

/**
 * Keys for vLLM's EC path: the part's `uuid` verbatim, as vLLM uses it; without one (the
 * proxy's --no-rewrite, or a direct caller), vLLM's own mm_hash of the image for
 * EPD_VLLM_MODEL_ID, so a consumer that hashes the media itself finds the file. Every key
 * is checked before anything is encoded: one unsafe key fails the whole call.
 */
@Injectable()
export class EcKeys {
  constructor(
    private readonly config: AppConfig,
    private readonly loader: MediaLoader,
  ) {}

  /** `modelId`: what the consumer hashes with (its --model). */
  async resolve(
    parts: readonly MediaPart[],
    deadline: number,
    modelId: string,
  ): Promise<KeyedPart[]> {
    for (const p of parts) {
      const why = p.uuid !== undefined ? unsafeKeyReason(p.uuid) : undefined;
      if (why) throw Errors.unsafeEcKey(p.uuid!, why);
    }
    return Promise.all(parts.map((p) => this.keyOf(p, deadline, modelId)));
  }

  private async keyOf(part: MediaPart, deadline: number, modelId: string): Promise<KeyedPart> {
    if (part.uuid !== undefined)
      return { ...part, key: part.uuid, keyFrom: 'uuid', item: { url: part.url } };
    if (part.modality !== 'image')
      throw Errors.invalidChat(
        `a ${part.modality} part needs a uuid: vLLM's mm_hash is computed here for images only`,
      );
    const bytes = await this.loader.load({ url: part.url }, undefined, deadline);
    let converted: boolean;
    try {
      converted = await convertedByVllm(bytes);
    } catch (err) {
      throw Errors.invalidChat(`image_url is not an image: ${(err as Error).message}`);
    }
    const key = mmHash(bytes, converted, modelId, this.config.vllm.hashAlgorithm);
    // The pipeline loads the part again; the hash makes sure it encodes the same bytes.
    const contentHash = createHash('sha256').update(bytes).digest('hex');
    return { ...part, key, keyFrom: 'mm_hash', item: { url: part.url, content_hash: contentHash } };
  }
}
