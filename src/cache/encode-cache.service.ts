import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { cacheUnits, type CacheUnit } from './cache-keys';
import { EmbeddingCache } from './embedding-cache';

/**
 * The embedding cache as the encode pipeline uses it: content keys that include the model
 * (a hash of its ONNX file, read once) and the preprocessing settings, over the LRU with
 * its in-process single flight. Off when EPD_CACHE_MAX_BYTES is 0.
 */
@Injectable()
export class EncodeCache {
  readonly store: EmbeddingCache;
  private readonly modelHashes = new Map<string, Promise<string>>();

  constructor(private readonly config: AppConfig) {
    this.store = new EmbeddingCache(config.cache.maxBytes);
  }

  get enabled(): boolean {
    return this.store.enabled;
  }

  /** The request's cache units; `modelPath` is the file that encodes its modality. */
  async units(modality: string, items: Uint8Array[], modelPath: string): Promise<CacheUnit[]> {
    const { minPixels, maxPixels, maxVideoFrames, stagingDtype } = this.config.encoder;
    const model = await this.modelHash(modelPath);
    return cacheUnits(
      { modality, model, minPixels, maxPixels, maxVideoFrames, stagingDtype },
      items,
    );
  }

  private modelHash(path: string): Promise<string> {
    let hash = this.modelHashes.get(path);
    if (!hash) {
      hash = readFile(path).then((bytes) => createHash('sha256').update(bytes).digest('hex'));
      hash.catch(() => this.modelHashes.delete(path));
      this.modelHashes.set(path, hash);
    }
    return hash;
  }
}
