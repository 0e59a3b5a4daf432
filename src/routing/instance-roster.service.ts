import { hostname } from 'node:os';
import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { AppConfig } from '../config/app-config';
import { NatsConnectionService } from '../transport/nats-connection.service';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { openKvBucket } from '../jetstream/bucket-settings';
import type { KvBucket, KvChanges } from '../jetstream/kv-bucket';
import type { LoadSnapshot } from '../common/load';
import { parseRosterEntry, type InstanceInfo } from './roster-entry';

export type { InstanceInfo } from './roster-entry';

export interface InstanceView extends InstanceInfo {
  last_heartbeat_ms_ago: number;
  alive: boolean;
  self: boolean;
}

/**
 * The live instances sharing the metadata bucket (EPD_REGISTRY_STORE=jetstream): each puts
 * a heartbeat into the KV bucket `<EPD_KV_BUCKET>_instances` every EPD_INSTANCE_HEARTBEAT_MS
 * (max age: three heartbeats), and one watcher keeps every instance's last heartbeat in
 * memory, so asking "is the owner alive?" costs a Map lookup, not a round trip. An
 * instance whose process died loses its NATS subscriptions at once; one that hangs or is
 * cut off stops heartbeating and is gone after three beats.
 */
@Injectable()
export class InstanceRoster implements OnApplicationBootstrap {
  private readonly logger = new Logger('InstanceRoster');
  private readonly seen = new Map<string, { info: InstanceInfo; at: number }>();
  private kv?: KvBucket;
  private watcher?: KvChanges;
  private timer?: NodeJS.Timeout;
  private closed = false;
  private httpUrl = '';
  /** When this instance's last heartbeat was stored (0: never). */
  private lastBeatStored = 0;
  /**
   * Since when every heartbeat of ours was stored, none failed or skipped (undefined: the
   * last one did not make it). See `trustworthy`.
   */
  private storedSince?: number;
  /** When the heartbeat still waiting for the store was sent (undefined: none waits). */
  private beatSentAt?: number;
  private readonly startedAt: number;
  /** This instance's load as last measured (`load.measured`): each heartbeat carries it. */
  private load?: LoadSnapshot;

  private listed!: () => void;
  /** Resolves once this instance's first heartbeat is stored (it is in the roster). */
  readonly inRoster = new Promise<void>((r) => (this.listed = r));

  constructor(
    private readonly config: AppConfig,
    private readonly buckets: BucketKeeper,
    private readonly clock: Clock,
    events: LifecycleEvents,
    /** With a shared store; a DP worker is part of its supervisor's instance, not one itself. */
    readonly enabled: boolean,
  ) {
    this.startedAt = clock.now();
    events.on('load.measured', (load) => (this.load = load));
  }

  private get nats(): NatsConnectionService {
    return this.buckets.nats;
  }

  private get ttlMs(): number {
    return 3 * this.config.instance.heartbeatMs;
  }

  /** Where this instance serves HTTP, for the roster (set once the listener is up). */
  setHttpUrl(url: string): void {
    this.httpUrl = url;
  }

  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    void this.start();
  }

  private get bucketName(): string {
    return `${this.config.registry.kvBucket}_instances`;
  }

  /**
   * The roster's bucket, created with our settings if missing (also after a deletion); an
   * existing one with other settings is refused (exit 78).
   */
  private async openBucket(): Promise<KvBucket> {
    const nc = await this.nats.connection();
    const { kv } = await openKvBucket(nc, {
      bucket: this.bucketName,
      ttlMs: this.ttlMs,
      replicas: this.config.registry.kvReplicas,
      history: 1,
      what: 'instance roster',
      settings: 'EPD_INSTANCE_HEARTBEAT_MS (its TTL is three heartbeats) and EPD_KV_REPLICAS',
    });
    return kv;
  }

  /** Opens the roster's bucket, retrying until it can (JetStream may come up after NATS). */
  private async start(): Promise<void> {
    const kv = await this.buckets.open(this.bucketName, () => this.openBucket(), this.logger);
    if (!kv || this.closed) return;
    this.kv = kv;
    this.buckets.keep(this.bucketName, `KV_${this.bucketName}`, async () => {
      this.kv = await this.openBucket();
    });
    await this.beat();
    // beat() catches its own failures; nothing a timer runs may end the process.
    this.timer = setInterval(
      () =>
        void this.beat().catch((err: unknown) =>
          this.logger.error({ err: (err as Error).message }, 'heartbeat failed'),
        ),
      this.config.instance.heartbeatMs,
    );
    this.timer.unref();
    void this.watch();
  }

  private info(): InstanceInfo {
    return {
      id: this.config.instance.id,
      rank: this.config.encoder.dpRank,
      pid: process.pid,
      host: hostname(),
      http_url: this.httpUrl,
      started_at: this.startedAt,
      ...(this.load ? { load: this.load } : {}),
    };
  }

  private async beat(): Promise<void> {
    if (!this.kv || this.closed) return;
    if (this.nats.state !== 'connected') {
      this.storedSince = undefined; // a beat skipped: the peers' may be missing too
      return;
    }
    if (this.beatSentAt !== undefined) return; // the last one still waits for the store
    const info = this.info();
    this.seen.set(info.id, { info, at: this.clock.now() });
    this.beatSentAt = this.clock.now();
    try {
      await this.kv.put(info.id, JSON.stringify(info));
      this.lastBeatStored = this.clock.now();
      this.storedSince ??= this.lastBeatStored;
      this.listed();
    } catch (err) {
      this.storedSince = undefined;
      this.logger.warn({ err: (err as Error).message }, 'heartbeat not stored');
      void this.buckets.failed(this.bucketName); // deleted? then made again
    } finally {
      this.beatSentAt = undefined;
    }
  }

  /**
   * Whether the roster itself works: every heartbeat of this instance over the last three
   * beats was stored, promptly. Only then does a peer's silence over the same span mean
   * the peer, not the store. While it does not (NATS reconnecting; JetStream electing a
   * leader for the roster's stream after a node loss, 3–9 s), a missing heartbeat proves
   * nothing, and nobody is called gone for it (an owner that died is still caught by "no
   * responders"). Before, one stored beat within the span was enough, and a peer whose
   * last beat landed just before the store stopped was called gone while ours, a little
   * later, still counted: the fault bench saw sends answered `owner_gone` for a live owner.
   */
  get trustworthy(): boolean {
    const now = this.clock.now();
    const pendingTooLong =
      this.beatSentAt !== undefined && now - this.beatSentAt > this.config.instance.heartbeatMs;
    return (
      !pendingTooLong &&
      this.storedSince !== undefined &&
      now - this.storedSince >= this.ttlMs &&
      now - this.lastBeatStored < this.ttlMs
    );
  }

  /** Every instance's heartbeats, from the current values on (the watcher heals itself). */
  private async watch(): Promise<void> {
    while (!this.closed && this.kv) {
      try {
        this.watcher = await this.kv.watch();
        for await (const e of this.watcher) {
          if (e.operation !== 'PUT') {
            this.seen.delete(e.key); // left on shutdown
            continue;
          }
          // Anyone who may write the bucket may write anything: a value that is not a roster
          // entry (a `null` put once stopped every instance) is logged and ignored.
          const info = parseRosterEntry(e.key, e.value);
          if (!info) {
            this.logger.warn({ key: e.key.slice(0, 128) }, 'roster: ignored an invalid entry');
            this.seen.delete(e.key);
            continue;
          }
          // A live beat counts from now (no clock skew between hosts); a stored one
          // replayed at start from when it was written.
          const at = e.isUpdate ? this.clock.now() : e.created.getTime();
          this.seen.set(e.key, { info, at });
          this.prune();
        }
      } catch (err) {
        if (this.closed) return;
        this.logger.warn({ err: (err as Error).message }, 'roster watcher stopped; restarting');
      }
      await new Promise((r) => setTimeout(r, 500).unref());
    }
  }

  /** Drops instances silent for long past the TTL: the map stays bounded by the live ones. */
  private prune(): void {
    const cutoff = this.clock.now() - 10 * this.ttlMs;
    for (const [id, s] of this.seen) if (s.at < cutoff) this.seen.delete(id);
  }

  /** Whether `id` heartbeat within the last three beats, by the watcher's record alone. */
  heardFrom(id: string): boolean {
    if (id === this.config.instance.id) return true;
    const s = this.seen.get(id);
    return s !== undefined && this.clock.now() - s.at < this.ttlMs;
  }

  /**
   * Whether `id` may be alive by what this process knows without a read: it heartbeat
   * within the last three beats, or the roster cannot tell (see `trustworthy`).
   */
  mayBeAlive(id: string): boolean {
    return this.heardFrom(id) || !this.trustworthy;
  }

  /**
   * Why `id` may be alive, in words an error can carry; undefined when it is gone. It may
   * be alive when it heartbeat within the last three beats, or the roster cannot tell
   * (`trustworthy`; an owner that died meanwhile is still caught by "no responders").
   * Before calling an instance gone, the bucket itself is asked, in case the watcher is
   * behind. An owner not called gone and then silent is `owner_unreachable`, which carries
   * this reason.
   */
  async whyAlive(id: string): Promise<string | undefined> {
    if (this.heardFrom(id)) return 'it heartbeat within the last three beats';
    if (!this.trustworthy) {
      return "this instance's roster cannot tell (its own heartbeats are not being stored on time)";
    }
    const entry = await this.kv?.get(id).then(
      (e) => e,
      () => 'unreadable' as const,
    );
    // A read that failed proves nothing (the roster's stream electing a leader, NATS
    // reconnecting): never called gone for it.
    if (entry === 'unreadable') return 'its roster entry could not be read';
    if (entry?.operation !== 'PUT') return undefined;
    const at = entry.created.getTime();
    if (this.clock.now() - at >= this.ttlMs) return undefined;
    const info = parseRosterEntry(id, entry.value);
    if (!info) return undefined;
    this.seen.set(id, { info, at });
    return 'its roster entry was written within the last three beats';
  }

  /**
   * Whether another member of the shared subjects' queue group stays in it while this
   * instance steps out (QueueGroupMembership): the live instance with the smallest id is
   * the anchor and never steps out, so the group is never left empty by shedding. Without
   * the roster (one instance, or a DP worker), or while the roster cannot be trusted,
   * nobody else is known: no.
   */
  anotherStaysIn(): boolean {
    if (!this.enabled || !this.trustworthy) return false;
    const self = this.config.instance.id;
    for (const id of this.seen.keys()) if (id < self && this.heardFrom(id)) return true;
    return false;
  }

  list(): InstanceView[] {
    this.prune();
    const now = this.clock.now();
    const self = this.info();
    if (!this.seen.has(self.id)) this.seen.set(self.id, { info: self, at: now });
    return [...this.seen.values()]
      .map(({ info, at }) => ({
        ...info,
        last_heartbeat_ms_ago: now - at,
        alive: this.heardFrom(info.id),
        self: info.id === self.id,
      }))
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  /**
   * The `leave-roster` shutdown phase (src/common/shutdown-phases.ts), after the handoff
   * (peers forward here while it runs) and before the NATS drain (the connection is up).
   */
  async leave(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.watcher?.stop();
    // Leave at once rather than after three silent beats: calls for this instance's
    // embeddings fail fast from now on.
    if (this.kv && this.nats.state === 'connected') {
      await this.kv.delete(this.config.instance.id).catch(() => undefined);
    }
  }
}
