import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { Base64UrlPaddedCodec, type ObjectInfo } from '@nats-io/obj';
import { headers, nuid } from '@nats-io/transport-node';
import { chunkSubjectOf, metaSubjectOf, streamOf } from './object-layout';

/**
 * Objects in JetStream Object Store buckets, written and read by hand in the Object
 * Store's own layout (nats.js's reader reads what this writes, digest checked: tested).
 * The library's put publishes one chunk per ack and hashes in
 * JavaScript on the event loop (about 10 ms per MiB here, which the encodes sharing the
 * loop paid for); its get opens a consumer per object and hashes again: measured, a store
 * hit was slower than a cold encode of a 448x448 image that way.
 */
/** No NATS server takes a message this large (its max_payload is at most 64 MiB). */
const MAX_CHUNK_BYTES = 64 * 1024 * 1024;

export class ObjectIo {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly chunkBytes: number,
    private readonly timeoutMs: number,
    /** The largest object read: no embedding this process could stage is larger. */
    private readonly maxObjectBytes: number,
  ) {}

  /**
   * An object's bytes and metadata through JetStream direct gets: its metadata message,
   * then its chunks (all at once when they are contiguous, else one by one). The bytes
   * are checked by the caller against the sha256 in the metadata (rowsOfObject). A
   * missing chunk, or sizes that disagree, throw "corrupt object".
   */
  async read(
    bucket: string,
    name: string,
  ): Promise<{ bytes: Uint8Array; meta?: Record<string, string> } | undefined> {
    const stream = streamOf(bucket);
    const last = await this.jsm.direct.getMessage(stream, {
      last_by_subj: metaSubjectOf(bucket, name),
    });
    if (!last) return undefined;
    const info = last.json<ObjectInfo>();
    if (info.deleted || !info.nuid) return undefined;
    this.checkLayout(info);
    const chunks = chunkSubjectOf(bucket, info.nuid);
    const parts =
      (await this.contiguous(stream, chunks, last.seq, info.chunks)) ??
      (await this.oneByOne(stream, chunks, info.chunks));
    const bytes = new Uint8Array(info.size);
    let at = 0;
    for (const part of parts) {
      if (at + part.length > bytes.length) throw new Error('corrupt object: chunks');
      bytes.set(part, at);
      at += part.length;
    }
    if (at !== info.size) throw new Error('corrupt object: size');
    return { bytes, meta: info.metadata };
  }

  /**
   * Anyone who may write the bucket writes its metadata too: before a byte is allocated or
   * a chunk asked for, the size must be one this process could have staged, and the chunk
   * count the one the size and chunk size give (a forged `chunks` once made one read ask
   * for the whole stream at once: +175 MB, and the connection dropped as a slow consumer).
   */
  private checkLayout(info: ObjectInfo): void {
    const { size, chunks } = info;
    const chunkSize = info.options?.max_chunk_size ?? this.chunkBytes;
    if (!Number.isSafeInteger(size) || size < 0 || size > this.maxObjectBytes)
      throw new Error(`corrupt object: size ${String(size)} (at most ${this.maxObjectBytes})`);
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_CHUNK_BYTES)
      throw new Error(`corrupt object: chunk size ${String(chunkSize)}`);
    if (chunks !== Math.ceil(size / chunkSize))
      throw new Error(`corrupt object: ${String(chunks)} chunks for ${size} bytes`);
  }

  /**
   * The chunks when they sit right before the metadata message, as one writer's put leaves
   * them: all asked at once. Undefined when any is not (puts interleaved), or missing.
   */
  private async contiguous(
    stream: string,
    subject: string,
    metaSeq: number,
    count: number,
  ): Promise<Uint8Array[] | undefined> {
    if (metaSeq - count < 1) return undefined;
    const msgs = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        this.jsm.direct.getMessage(stream, { seq: metaSeq - count + i }).catch(() => null),
      ),
    );
    if (msgs.some((m) => m?.subject !== subject)) return undefined;
    return msgs.map((m) => m!.data);
  }

  /** The chunks found one after another by subject (one round trip each). */
  private async oneByOne(stream: string, subject: string, count: number): Promise<Uint8Array[]> {
    const parts: Uint8Array[] = [];
    let seq = 0;
    for (let i = 0; i < count; i++) {
      const chunk = await this.jsm.direct.getMessage(stream, {
        seq: seq + 1,
        next_by_subj: subject,
      });
      if (!chunk) throw new Error('corrupt object: a chunk is missing');
      parts.push(chunk.data);
      seq = chunk.seq;
    }
    return parts;
  }

  /**
   * Writes one object: its chunks published at once, `digest` (its sha256) as the Object
   * Store records it, and the metadata message (a rollup of its subject) last. Until it
   * lands, readers see the previous version, whose chunks are purged after.
   */
  async write(
    bucket: string,
    name: string,
    data: Uint8Array,
    metadata: Record<string, string>,
    digest: Buffer,
  ): Promise<void> {
    const { js, jsm } = this;
    const stream = streamOf(bucket);
    const metaSubject = metaSubjectOf(bucket, name);
    const old = await jsm.direct.getMessage(stream, { last_by_subj: metaSubject });
    const id = nuid.next();
    const chunkSubject = chunkSubjectOf(bucket, id);
    const size = this.chunkBytes;
    const chunks = Math.ceil(data.length / size);
    try {
      await Promise.all(
        Array.from({ length: chunks }, (_, i) =>
          js.publish(chunkSubject, data.subarray(i * size, (i + 1) * size), {
            timeout: this.timeoutMs,
          }),
        ),
      );
      const info = {
        name,
        description: '',
        options: { max_chunk_size: size },
        metadata,
        bucket,
        nuid: id,
        size: data.length,
        chunks,
        mtime: new Date().toISOString(),
        digest: `SHA-256=${Base64UrlPaddedCodec.encode(digest)}`,
        deleted: false,
      };
      const h = headers();
      h.set('Nats-Rollup', 'sub');
      await js.publish(metaSubject, JSON.stringify(info), { headers: h, timeout: this.timeoutMs });
    } catch (err) {
      await jsm.streams.purge(stream, { filter: chunkSubject }).catch(() => undefined);
      throw err;
    }
    const previous = old?.json<ObjectInfo>().nuid;
    if (previous) {
      await jsm.streams
        .purge(stream, { filter: chunkSubjectOf(bucket, previous) })
        .catch(() => undefined);
    }
  }

  /**
   * Deletes an object and leaves nothing behind: its chunks and its metadata message are
   * purged (the library's delete keeps a marker). False when there was none.
   */
  async remove(bucket: string, name: string): Promise<boolean> {
    const stream = streamOf(bucket);
    const subject = metaSubjectOf(bucket, name);
    const last = await this.jsm.direct.getMessage(stream, { last_by_subj: subject });
    const id = last?.json<ObjectInfo>().nuid;
    if (!last || !id) return false;
    await this.jsm.streams.purge(stream, { filter: chunkSubjectOf(bucket, id) });
    await this.jsm.streams.purge(stream, { filter: subject });
    return true;
  }
}
