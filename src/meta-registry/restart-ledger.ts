import { Clock } from '../common/clock';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { stateDir } from '../common/fs/state-dir';

/** One req_id whose embedding this process held, and until when a call for it is expected. */
export type LedgerEntry = [reqId: string, until: number];

interface LedgerFile {
  boot: string;
  writtenAt: number;
  entries: LedgerEntry[];
}

/**
 * The req_ids whose metadata this process has published and not yet released, kept in a
 * small file, so that the next process (a restart, or a crash and a respawn) knows which
 * embeddings died with this one. With the memory store nothing else survives a restart:
 * a `send` for such a req_id used to be told "already released", and a registration
 * waited its whole deadline for an encode that would never start.
 *
 * The file is rewritten (to a temporary file, then renamed over it) at most every
 * `intervalMs`, and only after a change; what changed in the last interval before a crash
 * is not in it. It holds at most the registry's entries (EPD_REGISTRY_MAX_ENTRIES).
 *
 * While the service runs, the write and the rename run on libuv's threads, one at a time:
 * done on the event loop, the rename over the old file (ext4 starts writing the new one's
 * data back then) took 0.4-1 ms of the main thread five times a second under load, in a
 * CPU profile of 1024×768 encodes. The last write, at stop, is synchronous.
 */
export class RestartLedger {
  private dirty = false;
  /** Rewrites begun since start (each one follows a change). */
  private writes = 0;
  private timer?: NodeJS.Timeout;
  /** The write in flight on libuv's threads, if any. */
  private writing?: Promise<void>;
  /** Set by stop(): the contents an in-flight write must not leave behind it. */
  private final?: string;

  constructor(
    readonly path: string,
    private readonly boot: string,
    private readonly intervalMs: number,
    private readonly clock: Clock,
  ) {}

  /**
   * The file for this service (the JetStream store needs none: its records name their boot):
   * EPD_RESTART_LEDGER, or one per subject prefix and HTTP port under the private state dir.
   */
  static pathFor(configured: string, prefix: string, httpPort: number): string | undefined {
    if (configured === 'off') return undefined;
    if (configured) return configured;
    const name = `${prefix}-${httpPort}`.replace(/[^A-Za-z0-9_.-]/g, '_');
    return join(stateDir(), `staged-${name}.json`);
  }

  /** What the previous process held, still within its TTL; [] when there is no such file. */
  previous(now: number): LedgerEntry[] {
    let file: LedgerFile;
    try {
      file = JSON.parse(readFileSync(this.path, 'utf8')) as LedgerFile;
    } catch {
      return []; // none yet, or unreadable: nothing is known to be lost
    }
    if (file.boot === this.boot || !Array.isArray(file.entries)) return [];
    return file.entries.filter(
      (e): e is LedgerEntry =>
        Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number' && e[1] > now,
    );
  }

  /** Writes `entries()` after each change, at most every intervalMs, until stop(). */
  start(entries: () => Iterable<LedgerEntry>, onError: (err: unknown) => void): void {
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    this.dirty = true; // the previous process's file is replaced by this one's at once
    this.timer = setInterval(() => {
      if (!this.dirty || this.writing) return;
      this.dirty = false;
      this.writes++;
      const text = this.contents(entries());
      const tmp = `${this.path}.${process.pid}.tmp`;
      this.writing = writeFile(tmp, text, { mode: 0o600 })
        .then(() => rename(tmp, this.path))
        .catch((err: unknown) => {
          this.dirty = true;
          onError(err);
        })
        .finally(() => {
          this.writing = undefined;
          // Stopped meanwhile: this rename may have landed after stop()'s own write.
          if (this.final === undefined) return;
          try {
            this.writeNow(this.final);
          } catch (err) {
            onError(err);
          }
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** For GET /admin/registry: rewrites so far, and whether a change waits to be written. */
  get stats(): { path: string; writes: number; pending_write: boolean; writing: boolean } {
    return {
      path: this.path,
      writes: this.writes,
      pending_write: this.dirty,
      writing: this.writing !== undefined,
    };
  }

  /** Settles when no write is in flight (for tests, and a stop that may wait). */
  async idle(): Promise<void> {
    await this.writing;
  }

  changed(): void {
    this.dirty = true;
  }

  /** Stops the timer and writes what is held now: a graceful stop loses it all the same. */
  stop(entries: Iterable<LedgerEntry>): void {
    if (!this.timer) return; // never started (or its directory could not be made)
    clearInterval(this.timer);
    this.timer = undefined;
    this.final = this.contents(entries);
    this.writeNow(this.final);
  }

  private contents(entries: Iterable<LedgerEntry>): string {
    const file: LedgerFile = {
      boot: this.boot,
      writtenAt: this.clock.now(),
      entries: [...entries],
    };
    return JSON.stringify(file);
  }

  /** Synchronously, under a name of its own (an async write may be using the other). */
  private writeNow(text: string): void {
    const tmp = `${this.path}.${process.pid}.final.tmp`;
    writeFileSync(tmp, text, { mode: 0o600 });
    renameSync(tmp, this.path);
  }
}
