import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { Logger } from '@nestjs/common';
import type { StreamedMessage, StreamedReplies, StreamSend } from '../transport/streamed-replies';
import { MMError } from '../common/errors/mm-error';
import { withTimeout } from '../common/timeout';
import type { CacheEntry, EmbeddingCache } from './embedding-cache';

/** Fetches a process serves at once; beyond it a fetch is answered 503 and the caller retries. */
const MAX_SERVING = 4096;
/** The longest a fetch is served (waiting for an encode in flight), whatever it asks. */
const MAX_SERVE_MS = 600_000;
/** The largest entry a fetch accepts from a peer (a bound on what a bad answer can allocate). */
const MAX_ENTRY_BYTES = 2 ** 31;
type Kind = 'planned' | 'alive' | 'entry' | 'chunk' | 'error' | 'absent';

interface EntryHeader {
  tokens: number;
  dim: number;
  grid: number[][];
  bytes: number;
  dtype: 'f32' | 'u16';
  chunks: number;
  chunk_bytes: number;
}

/**
 * The owner could not serve the rows: it is gone (no responders), silent for a lease, or
 * no longer has them. The caller marks the claim unusable and takes it over.
 */
export class PeerUnusable extends Error {}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/**
 * Cluster-wide single flight, the data half: a process that joined another's claim asks
 * the owner (on the subject in the claim) for the unit's rows. The owner answers from its
 * cache, or from its encode in flight: the token count as soon as it is planned (so the
 * joiner publishes metadata early), a heartbeat every third of a lease while it works,
 * then the rows in binary chunks that fit the server's max_payload, or the encode's
 * error. Raw NATS, not a Nest pattern: the reply is a stream of binary messages.
 */
export class CachePeer {
  private readonly logger = new Logger('CachePeer');
  private stopServing?: () => void;
  private serving = 0;
  private readonly counters = { served: 0, fetched: 0, unusable: 0 };

  constructor(
    private readonly store: EmbeddingCache,
    private readonly leaseMs: number,
    private readonly clock: Clock,
  ) {}

  get stats(): { served: number; fetched: number; unusable: number; serving: number } {
    return { ...this.counters, serving: this.serving };
  }

  /** Serves this process's cache and flights on `subject`. */
  serve(replies: StreamedReplies, subject: string): void {
    this.stopServing = replies.serve(subject, (body, send) =>
      this.onFetch(body, send, replies.chunkBytes),
    );
  }

  stop(): void {
    this.stopServing?.();
    this.stopServing = undefined;
  }

  private onFetch(body: Uint8Array, send: StreamSend, chunkBytes: number): void {
    let req: { key?: unknown; timeout_ms?: unknown };
    try {
      req = JSON.parse(Buffer.from(body).toString('utf8')) as typeof req;
    } catch {
      return send('error', json({ code: 400, type: 'bad_request', message: 'not JSON' }));
    }
    if (typeof req.key !== 'string') {
      return send('error', json({ code: 400, type: 'bad_request', message: 'missing key' }));
    }
    if (this.serving >= MAX_SERVING) {
      return send(
        'error',
        json({
          code: 503,
          type: 'cache_peer_busy',
          message: `${this.serving} cache fetches in progress`,
        }),
      );
    }
    const asked = typeof req.timeout_ms === 'number' ? req.timeout_ms : this.leaseMs;
    const timeoutMs = Math.min(asked, MAX_SERVE_MS);
    this.serving++;
    void this.answer(req.key, Math.max(1, timeoutMs), send, chunkBytes)
      .catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message }, 'cache fetch failed'),
      )
      .finally(() => this.serving--);
  }

  private async answer(
    key: string,
    timeoutMs: number,
    send: (kind: Kind, data?: Uint8Array, chunk?: number) => void,
    chunkBytes: number,
  ): Promise<void> {
    const cached = this.store.peek(key);
    const flight = cached ? undefined : this.store.flightOf(key);
    if (!cached && !flight) return send('absent');
    const beat = setInterval(() => send('alive'), Math.max(50, Math.floor(this.leaseMs / 3)));
    const late = () => new Error(`the encode did not finish within ${timeoutMs} ms`);
    try {
      let entry = cached;
      if (!entry) {
        const until = this.clock.now() + timeoutMs;
        send('planned', json({ tokens: await withTimeout(flight!.planned, timeoutMs, late) }));
        entry = await withTimeout(flight!.done, until - this.clock.now(), late);
      } else {
        send('planned', json({ tokens: entry.tokens }));
      }
      this.sendEntry(entry, send, chunkBytes);
      this.counters.served++;
    } catch (err) {
      const e =
        err instanceof MMError
          ? { code: err.code, type: err.type, message: err.message }
          : { code: 503, type: 'cache_owner_failed', message: (err as Error).message };
      send('error', json(e));
    } finally {
      clearInterval(beat);
    }
  }

  private sendEntry(
    entry: CacheEntry,
    send: (kind: Kind, data?: Uint8Array, chunk?: number) => void,
    chunkBytes: number,
  ): void {
    const { data } = entry;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const chunks = Math.ceil(bytes.byteLength / chunkBytes);
    const header: EntryHeader = {
      tokens: entry.tokens,
      dim: entry.dim,
      grid: entry.grid,
      bytes: bytes.byteLength,
      dtype: data.BYTES_PER_ELEMENT === 4 ? 'f32' : 'u16',
      chunks,
      chunk_bytes: chunkBytes,
    };
    send('entry', json(header));
    for (let i = 0; i < chunks; i++) {
      send('chunk', bytes.subarray(i * chunkBytes, (i + 1) * chunkBytes), i);
    }
  }

  /**
   * The rows of `key` from the owner at `subject`: `onPlanned` gets the token count first.
   * Rejects with PeerUnusable when the owner is gone, silent for a lease, or without the
   * rows; with the owner's own error (an MMError) when its encode failed.
   */
  async fetch(
    replies: StreamedReplies,
    subject: string,
    key: string,
    deadline: number,
    onPlanned: (tokens: number) => void,
  ): Promise<CacheEntry> {
    return new Promise<CacheEntry>((resolve, reject) => {
      let header: EntryHeader | undefined;
      let buffer: Uint8Array | undefined;
      let received = 0;
      let silence: NodeJS.Timeout | undefined;
      const total = setTimeout(
        () => finish(Errors.deadlineExceeded(`cache fetch from ${subject}`)),
        Math.max(1, deadline - this.clock.now()),
      );
      let stop: (() => void) | undefined;
      let finished = false;
      const finish = (err?: Error, entry?: CacheEntry) => {
        if (finished) return;
        finished = true;
        clearTimeout(total);
        clearTimeout(silence);
        stop?.();
        if (err) {
          if (err instanceof PeerUnusable) this.counters.unusable++;
          reject(err);
        } else {
          this.counters.fetched++;
          resolve(entry!);
        }
      };
      const heard = () => {
        clearTimeout(silence);
        silence = setTimeout(
          () =>
            finish(
              new PeerUnusable(`the cache owner at ${subject} was silent for ${this.leaseMs} ms`),
            ),
          this.leaseMs,
        );
      };
      const onMsg = (msg: StreamedMessage) => {
        if (finished) return;
        heard();
        if (msg.noResponders) return finish(new PeerUnusable(`no process answers ${subject}`));
        switch (msg.kind as Kind | undefined) {
          case 'planned':
            return onPlanned(msg.json<{ tokens: number }>().tokens);
          case 'absent':
            return finish(
              new PeerUnusable(`the cache owner at ${subject} no longer has the entry`),
            );
          case 'error': {
            const e = msg.json<{ code: number; type?: string; message: string }>();
            return finish(Errors.remote(e.message, e.code, undefined, e.type));
          }
          case 'entry': {
            header = msg.json<EntryHeader>();
            const width = header.dtype === 'f32' ? 4 : 2;
            if (
              !Number.isSafeInteger(header.bytes) ||
              header.bytes !== header.tokens * header.dim * width ||
              header.bytes > MAX_ENTRY_BYTES
            ) {
              return finish(new PeerUnusable(`the cache owner at ${subject} sent a bad entry`));
            }
            buffer = new Uint8Array(header.bytes);
            if (header.chunks === 0) return finish(undefined, toEntry(key, header, buffer));
            return;
          }
          case 'chunk': {
            if (!header || !buffer)
              return finish(new PeerUnusable('a chunk came before its entry'));
            const i = Number(msg.chunk);
            const at = i * header.chunk_bytes;
            if (!Number.isInteger(i) || i < 0 || at + msg.data.length > buffer.length) {
              return finish(new PeerUnusable(`the cache owner at ${subject} sent a bad chunk`));
            }
            buffer.set(msg.data, at);
            if (++received === header.chunks) finish(undefined, toEntry(key, header, buffer));
            return;
          }
          default:
            return;
        }
      };
      heard();
      try {
        const body = json({ key, timeout_ms: Math.max(1, deadline - this.clock.now()) });
        stop = replies.ask(subject, body, onMsg, (err) => finish(err));
        if (finished) stop();
      } catch (err) {
        finish(err as Error); // the connection is closed or draining
      }
    });
  }
}

function toEntry(key: string, h: EntryHeader, bytes: Uint8Array): CacheEntry {
  const data =
    h.dtype === 'f32'
      ? new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)
      : new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  return { key, data, tokens: h.tokens, dim: h.dim, grid: h.grid, bytes: h.bytes, hits: 0 };
}
