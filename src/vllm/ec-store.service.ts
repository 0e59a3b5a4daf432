import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { mkdir, open, opendir, readdir, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Clock } from '../common/clock';
import { StartRefusedError } from '../common/start-refused';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import type { StagingDtype } from '../common/kernel';
import { AppConfig } from '../config/app-config';
import { unsafeKeyReason } from './ec-keys';
import { safetensorsHead } from './safetensors';

/** ECExampleConnector's file name inside `<path>/<key>/`. */
export const EC_FILE = 'encoder_cache.safetensors';
/** The one tensor it holds. */
export const EC_TENSOR = 'ec_cache';
/** Temporary names start with this, so a consumer's exists() never matches them. */
const TMP_PREFIX = '.epd-tmp-';
/** The longest gap between sweeps, whatever the TTL. */
const MAX_SWEEP_MS = 30_000;
/** A write failure of the same kind is logged at most this often (each one is counted). */
const LOG_EVERY_MS = 10_000;

interface Entry {
  bytes: number;
  /** When it was last written or re-published (epoch ms): its TTL runs from here. */
  touchedAt: number;
}

export interface EcStoreStats {
  path: string | null;
  files: number;
  bytes: number;
  maxBytes: number;
  ttlS: number;
  writing: number;
  writes: { ok: number; failed: number };
  bytesWritten: number;
  evictions: { ttl: number; budget: number };
  emptyDirsRemoved: number;
  lastError: string | null;
}

/**
 * The files vLLM's ECExampleConnector consumers read: `<EPD_VLLM_EC_PATH>/<key>/encoder_cache.safetensors`.
 *
 * Every file is written whole under a temporary name in its own directory, then renamed:
 * a consumer that polls with exists() sees nothing or the whole file, never part of one. An
 * existing directory (consumers create an empty one on every miss) is used as it is.
 *
 * vLLM never deletes these files; this store does. Every file it wrote (and those found
 * at start) is kept in least-recently-used order: a file not re-published within
 * EPD_VLLM_EC_TTL_S is deleted, and the oldest go first when a write needs room under
 * EPD_VLLM_EC_MAX_BYTES. A key being written is never swept. The empty directories that
 * consumers leave on a miss are removed by the same sweep.
 */
@Injectable()
export class EcStore implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('VllmEcStore');
  private readonly root?: string;
  /** Insertion order is recency: a re-published key moves to the end. */
  private readonly entries = new Map<string, Entry>();
  private readonly writing = new Set<string>();
  private usedBytes = 0;
  private tmpCounter = 0;
  private timer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;
  private readonly lastLogged = new Map<string, number>();
  readonly counts = {
    writesOk: 0,
    writesFailed: 0,
    bytesWritten: 0,
    evictedTtl: 0,
    evictedBudget: 0,
    emptyDirsRemoved: 0,
  };
  private lastError: string | null = null;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {
    this.root = config.vllm.ecPath;
  }

  get enabled(): boolean {
    return this.root !== undefined;
  }

  private get ttlMs(): number {
    return this.config.vllm.ecTtlS * 1000;
  }

  /**
   * Creates the path, proves it writable (a start with an unwritable path stops here, naming
   * it), adopts the files already there (a restart keeps sweeping them) and removes
   * temporary files a crash left.
   */
  async onModuleInit(): Promise<void> {
    if (!this.root) return;
    try {
      await mkdir(this.root, { recursive: true });
      const probe = join(this.root, `${TMP_PREFIX}probe-${process.pid}`);
      await (await open(probe, 'w')).close();
      await unlink(probe);
    } catch (err) {
      throw new StartRefusedError(
        `EPD_VLLM_EC_PATH ${this.root} is not a writable directory: ${(err as Error).message}`,
        { cause: err },
      );
    }
    await this.adopt();
    const every = Math.min(MAX_SWEEP_MS, Math.max(1000, this.ttlMs / 4));
    this.timer = setInterval(() => void this.sweep(), every);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  /**
   * Writes one embedding as `<key>/encoder_cache.safetensors` (tensor `ec_cache`, `dtype`,
   * `shape`), atomically. Refuses an unsafe key (400), a disk that is full (507) or not
   * writable (503), leaving no partial file.
   */
  async publish(
    key: string,
    dtype: StagingDtype,
    shape: readonly number[],
    data: Uint8Array,
  ): Promise<{ bytes: number; file: string }> {
    if (!this.root) throw Errors.ecPathUnwritable('EPD_VLLM_EC_PATH is not set');
    const why = unsafeKeyReason(key);
    if (why) throw Errors.unsafeEcKey(key, why);
    const head = safetensorsHead(EC_TENSOR, dtype, shape, data.byteLength);
    const bytes = head.length + data.byteLength;
    const max = this.config.vllm.ecMaxBytes;
    if (bytes > max) {
      this.counts.writesFailed++;
      throw Errors.ecPathFull(
        `one embedding of ${bytes} bytes exceeds EPD_VLLM_EC_MAX_BYTES=${max}`,
      );
    }
    this.writing.add(key);
    const dir = join(this.root, key);
    const file = join(dir, EC_FILE);
    const tmp = join(dir, `${TMP_PREFIX}${process.pid}-${++this.tmpCounter}`);
    try {
      await this.makeRoom(bytes, key);
      await mkdir(dir, { recursive: true });
      const fh = await open(tmp, 'wx');
      try {
        await fh.writev([head, data]);
      } finally {
        await fh.close();
      }
      await rename(tmp, file);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      this.counts.writesFailed++;
      throw this.writeError(err as NodeJS.ErrnoException, key);
    } finally {
      this.writing.delete(key);
    }
    this.remember(key, bytes);
    this.counts.writesOk++;
    this.counts.bytesWritten += bytes;
    return { bytes, file };
  }

  stats(): EcStoreStats {
    return {
      path: this.root ?? null,
      files: this.entries.size,
      bytes: this.usedBytes,
      maxBytes: this.config.vllm.ecMaxBytes,
      ttlS: this.config.vllm.ecTtlS,
      writing: this.writing.size,
      writes: { ok: this.counts.writesOk, failed: this.counts.writesFailed },
      bytesWritten: this.counts.bytesWritten,
      evictions: { ttl: this.counts.evictedTtl, budget: this.counts.evictedBudget },
      emptyDirsRemoved: this.counts.emptyDirsRemoved,
      lastError: this.lastError,
    };
  }

  /** One sweep now (the timer runs it too): expired files, then empty directories. */
  sweep(): Promise<void> {
    this.sweeping ??= this.sweepOnce().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    if (!this.root) return;
    const expiredBefore = this.clock.now() - this.ttlMs;
    for (const [key, entry] of [...this.entries]) {
      if (entry.touchedAt > expiredBefore) break;
      if (this.writing.has(key)) continue;
      await this.evict(key, 'ttl');
    }
    await this.removeEmptyDirs();
  }

  private remember(key: string, bytes: number): void {
    const old = this.entries.get(key);
    if (old) this.usedBytes -= old.bytes;
    this.entries.delete(key);
    this.entries.set(key, { bytes, touchedAt: this.clock.now() });
    this.usedBytes += bytes;
  }

  /** Evicts least recently used files (never one being written) until `bytes` fit. */
  private async makeRoom(bytes: number, writing: string): Promise<void> {
    const max = this.config.vllm.ecMaxBytes;
    const replaced = this.entries.get(writing)?.bytes ?? 0;
    for (const key of [...this.entries.keys()]) {
      if (this.usedBytes - replaced + bytes <= max) return;
      if (this.writing.has(key)) continue;
      await this.evict(key, 'budget');
    }
  }

  private async evict(key: string, why: 'ttl' | 'budget'): Promise<void> {
    const entry = this.entries.get(key);
    if (!entry || !this.root) return;
    this.entries.delete(key);
    this.usedBytes -= entry.bytes;
    if (why === 'ttl') this.counts.evictedTtl++;
    else this.counts.evictedBudget++;
    const dir = join(this.root, key);
    await rm(join(dir, EC_FILE), { force: true }).catch((err: unknown) =>
      this.logger.warn({ key, err: (err as Error).message }, 'could not delete an EC file'),
    );
    // The directory goes too unless something else (another writer's file) is in it.
    await rmdir(dir).catch(() => undefined);
  }

  /** Directories with nothing in them that no write of ours is using: consumers' misses. */
  private async removeEmptyDirs(): Promise<void> {
    if (!this.root) return;
    let dirs;
    try {
      dirs = await opendir(this.root);
    } catch {
      return;
    }
    for await (const d of dirs) {
      if (!d.isDirectory() || this.entries.has(d.name) || this.writing.has(d.name)) continue;
      try {
        await rmdir(join(this.root, d.name)); // only succeeds when empty
        this.counts.emptyDirsRemoved++;
      } catch {
        // not empty (another writer's file) or already gone: left alone
      }
    }
  }

  /** Files found at start are adopted oldest first, with their mtime as their last write. */
  private async adopt(): Promise<void> {
    const root = this.root!;
    const found: { key: string; bytes: number; at: number }[] = [];
    for (const name of await readdir(root)) {
      if (name.startsWith(TMP_PREFIX)) continue;
      const dir = join(root, name);
      try {
        for (const inner of await readdir(dir)) {
          if (inner.startsWith(TMP_PREFIX)) await unlink(join(dir, inner)).catch(() => undefined);
        }
        const st = await stat(join(dir, EC_FILE));
        found.push({ key: name, bytes: st.size, at: st.mtimeMs });
      } catch {
        // not a directory, or no file in it: the sweep removes it if empty
      }
    }
    found.sort((a, b) => a.at - b.at);
    for (const f of found) {
      this.entries.set(f.key, { bytes: f.bytes, touchedAt: f.at });
      this.usedBytes += f.bytes;
    }
    if (found.length > 0)
      this.logger.log(
        { path: root, files: found.length, bytes: this.usedBytes },
        'adopted the EC files already under EPD_VLLM_EC_PATH; they expire like new ones',
      );
  }

  /** A write failure as the caller sees it, logged clearly (at most once per 10 s per kind). */
  private writeError(err: NodeJS.ErrnoException, key: string): MMError {
    if (err instanceof MMError) return err;
    const detail = `${err.code ?? 'error'} writing ${key}/${EC_FILE} under ${this.root}: ${err.message}`;
    this.lastError = detail;
    const full = err.code === 'ENOSPC' || err.code === 'EDQUOT';
    const kind = full ? 'full' : 'unwritable';
    const now = this.clock.now();
    if ((this.lastLogged.get(kind) ?? 0) + LOG_EVERY_MS <= now) {
      this.lastLogged.set(kind, now);
      this.logger.error(
        { path: this.root, key, code: err.code, failed: this.counts.writesFailed },
        full
          ? 'EPD_VLLM_EC_PATH is full: embeddings cannot be published for vLLM consumers (507 to the proxy); free space or lower EPD_VLLM_EC_MAX_BYTES'
          : 'EPD_VLLM_EC_PATH cannot be written: embeddings cannot be published for vLLM consumers (503 to the proxy)',
      );
    }
    return full ? Errors.ecPathFull(detail) : Errors.ecPathUnwritable(detail);
  }
}
