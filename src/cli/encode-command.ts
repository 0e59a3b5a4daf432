import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { EncodeResult, EncoderClient } from '../client/encoder-client';
import type { Modality } from '../encoder/encode-request.schema';
import { parseEndpoint } from '../transfer/embedding-transport';
import { MEDIA_TYPES } from './media-types';

export interface EncodeCommandOptions {
  items: string[];
  modality?: string;
  reqId?: string;
  send?: string;
  wait: boolean;
  keep: boolean;
  timeoutMs?: number;
}

export interface EncodeCommandResult extends EncodeResult {
  /** With --wait: when wait_metadata answered, counted from the encode's start. */
  metadata_after_ms?: number;
  sent?: { endpoint: string; bytes: number; acked: true };
  released: boolean;
}

/** A file becomes a data URI (its type from the extension); URLs and data URIs pass as they are. */
export function mediaItem(item: string): { url: string; modality?: Modality } {
  if (/^(https?|data|file):/i.test(item)) return { url: item };
  const known = MEDIA_TYPES[extname(item).toLowerCase()];
  const bytes = readFileSync(item);
  const mime = known?.[0] ?? 'application/octet-stream';
  return { url: `data:${mime};base64,${bytes.toString('base64')}`, modality: known?.[1] };
}

/**
 * `epd encode`: encodes files or URLs as one request, optionally watching for its
 * metadata as a receiver would (--wait) and delivering the embedding to a receiver
 * (--send host:port); then releases it unless --keep.
 */
export async function encodeCommand(
  client: EncoderClient,
  o: EncodeCommandOptions,
): Promise<EncodeCommandResult> {
  const to = o.send === undefined ? undefined : parseEndpoint(o.send);
  if (o.send !== undefined && !to) throw new UsageError(`--send must be host:port, got ${o.send}`);
  const items = o.items.map(mediaItem);
  const modality = (o.modality ?? items.find((i) => i.modality)?.modality ?? 'image') as Modality;
  const reqId = o.reqId ?? `epd-cli-${randomUUID()}`;
  const started = performance.now();
  const metadata = o.wait
    ? client
        .waitMetadata(reqId, { timeoutMs: o.timeoutMs })
        .then(() => Math.round((performance.now() - started) * 100) / 100)
    : undefined;
  metadata?.catch(() => undefined);
  const result = await client.encode(
    { req_id: reqId, modality, mm_items: items.map((i) => i.url) },
    { timeoutMs: o.timeoutMs },
  );
  const out: EncodeCommandResult = { ...result, released: false };
  if (metadata) out.metadata_after_ms = await metadata;
  if (to) {
    const sent = await client.send(reqId, to, { receiveCount: 1, timeoutMs: o.timeoutMs });
    out.sent = { endpoint: `${to.host}:${to.port}`, bytes: sent.bytes, acked: true };
    out.released = true; // its one receiver acked
  } else if (!o.keep) {
    await client.release(reqId);
    out.released = true;
  }
  return out;
}

export class UsageError extends Error {}
