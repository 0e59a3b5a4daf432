import { Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Errors, quotedList } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import { tokensForGrid } from '../common/vision-geometry';
import { visionModelsOf } from '../config/model-dir';
import { EncodeGateway } from '../encoder/encode-gateway';
import type { EncodeRequest } from '../encoder/encode-request.schema';
import { RequestLifecycle } from '../requests/request-lifecycle.service';
import { ReqStateStore } from '../requests/req-state.store';
import { mediaParts, type ChatRequest } from './chat-request.schema';
import { EcKeys, type KeyedPart } from './ec-keys.service';
import { EcStore } from './ec-store.service';

/** One `ec_items` entry: the key, and the grid the consumer's placeholder is sized from. */
export type EcItem = { mm_hash: string } & (
  { image_grid_thw: number[] } | { video_grid_thw: number[] } | { audio_feature_lengths: number[] }
);

interface Encoded {
  item: EcItem;
  rows: number;
}

export interface EncodedParts {
  items: EcItem[];
  /** Embedding rows written, over all parts. */
  tokens: number;
}

/**
 * vLLM's encode instance: each media part of the proxy's chat request runs this process's
 * encode pipeline (EncodeGateway) (validation, budgets, batching, the cache and its single flight) as its own
 * encode, and is written as `<EPD_VLLM_EC_PATH>/<key>/encoder_cache.safetensors` before the
 * call is answered, so the proxy never sends a consumer to a file that is not there. The
 * staged embedding is released once written. Parts with the same key are encoded once.
 */
@Injectable()
export class VllmEncodeService {
  private readonly logger = new Logger('VllmEncode');
  /** Patches merged per side into one token, by served vision model (the default first). */
  private readonly mergeSizes: Map<string, number>;
  private readonly defaultModel: string;

  constructor(
    private readonly config: AppConfig,
    private readonly encoder: EncodeGateway,
    private readonly states: ReqStateStore,
    private readonly lifecycle: RequestLifecycle,
    private readonly keys: EcKeys,
    private readonly store: EcStore,
  ) {
    const specs = visionModelsOf(config.encoder);
    this.mergeSizes = new Map(specs.map((m) => [m.name, m.geometry.mergeSize]));
    this.defaultModel = specs[0]!.name;
  }

  get enabled(): boolean {
    return this.store.enabled;
  }

  async encode(req: ChatRequest, deadline: number): Promise<EncodedParts> {
    const parts = mediaParts(req);
    if (parts.length === 0)
      throw Errors.invalidChat('no image_url, video_url, audio_url or input_audio part to encode');
    const max = this.config.encoder.maxItems;
    if (parts.length > max)
      throw Errors.invalidChat(`${parts.length} media parts; at most ${max} (EPD_MAX_ITEMS)`);
    const model = this.modelOf(req.model);
    // The consumer of a model other than the default hashes with that model's name (its --model).
    const keyed = await this.keys.resolve(parts, deadline, model ?? this.config.vllm.modelId!);
    const byKey = new Map<string, Promise<Encoded>>();
    for (const part of keyed) {
      if (!byKey.has(part.key)) byKey.set(part.key, this.encodePart(part, deadline, model));
    }
    // Every part settles before the call answers: none keeps running unobserved.
    const settled = await Promise.allSettled(byKey.values());
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const done = new Map<string, Encoded>();
    [...byKey.keys()].forEach((key, i) =>
      done.set(key, (settled[i] as PromiseFulfilledResult<Encoded>).value),
    );
    const results = keyed.map((p) => done.get(p.key)!);
    return {
      items: results.map((r) => r.item),
      tokens: results.reduce((n, r) => n + r.rows, 0),
    };
  }

  /**
   * The served model the chat's `model` names: absent, EPD_VLLM_MODEL_ID or the default
   * model's name → the default (undefined); another served model's name → it; anything else
   * is a 400 that lists them.
   */
  private modelOf(requested: string | undefined): string | undefined {
    if (requested === undefined || requested === this.config.vllm.modelId) return undefined;
    if (requested === this.defaultModel) return undefined;
    if (this.mergeSizes.has(requested)) return requested;
    throw Errors.unknownModel(
      requested,
      quotedList([
        ...(this.config.vllm.modelId ? [this.config.vllm.modelId] : []),
        ...this.mergeSizes.keys(),
      ]),
    );
  }

  private async encodePart(
    part: KeyedPart,
    deadline: number,
    model: string | undefined,
  ): Promise<Encoded> {
    const reqId = `vllm-${randomUUID()}`;
    try {
      const req: EncodeRequest = {
        req_id: reqId,
        modality: part.modality,
        mm_items: [part.item],
        num_parts: 1,
        part_idx: 0,
        // vLLM's consumer computes a video's timing itself: nothing rides on the file.
        fps: undefined,
        hashes: undefined,
        cache_namespace: undefined,
        model,
        prefill_host: undefined,
        embedding_port: undefined,
        timeout_ms: undefined,
        deadline_ms: undefined,
      };
      await this.encoder.encode(req, req, deadline);
      const embedding = this.states.get(reqId)?.embedding;
      if (!embedding) throw Errors.internal(reqId);
      const grid = embedding.grid[0] ?? [];
      // A file whose row count disagrees with its grid kills the consumer mid-forward: never written.
      if (
        part.modality !== 'audio' &&
        gridRows(grid, this.mergeSizes.get(model ?? this.defaultModel)!) !== embedding.tokens
      ) {
        this.logger.error(
          { key: part.key, grid, rows: embedding.tokens },
          'embedding rows disagree with the grid: not written (a vLLM consumer would fail mid-forward on it)',
        );
        throw Errors.internal(reqId);
      }
      const { data } = embedding;
      await this.store.publish(
        part.key,
        embedding.dtype,
        [embedding.tokens, embedding.dim],
        new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      );
      const rows = embedding.tokens;
      if (part.modality === 'image')
        return { item: { mm_hash: part.key, image_grid_thw: grid }, rows };
      if (part.modality === 'video')
        return { item: { mm_hash: part.key, video_grid_thw: grid }, rows };
      return { item: { mm_hash: part.key, audio_feature_lengths: grid }, rows };
    } finally {
      // A failed encode already freed its state; releasing it again would leave a tombstone.
      if (this.states.get(reqId)) await this.lifecycle.release(reqId, 'ack');
    }
  }
}

/** Rows of one image or video: the tokens its grid reserves (one per merge² patches). */
function gridRows(grid: readonly number[], mergeSize: number): number {
  const [t = 0, h = 0, w = 0] = grid;
  return tokensForGrid(t, h, w, mergeSize);
}
