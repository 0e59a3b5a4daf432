import { hostname } from 'node:os';
import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { jetstream } from '@nats-io/jetstream';
import { Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';
import { NatsConnectionService } from '../transport/nats-connection.service';

export interface InstanceInfo {
  id: string;
  rank: number;
  pid: number;
  host: string;
  http_url: string;
  started_at: number;
}

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
export class InstanceRoster implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('InstanceRoster');
  private readonly seen = new Map<string, { info: InstanceInfo; at: number }>();
  private kv?: KV;
  private watcher?: QueuedIterator<KvWatchEntry>;
  private timer?: NodeJS.Timeout;
  private closed = false;
  private httpUrl = '';
  /** When this instance's last heartbeat was stored (0: never). */
  private lastBeatStored = 0;
  private readonly startedAt: number;

  constructor(
    private readonly config: AppConfig,
    private readonly nats: NatsConnectionService,
    private readonly clock: Clock,
    private readonly role: ProcessRole,
  ) {
    this.startedAt = clock.now();
  }

  /** With a shared store; a DP worker is part of its supervisor's instance, not one itself. */
  get enabled(): boolean {
    return this.config.registry.store === 'jetstream' && !this.role.worker;
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

  private async start(): Promise<void> {
    try {
      const nc = await this.nats.connection();
      this.kv = await new Kvm(jetstream(nc)).create(`${this.config.registry.kvBucket}_instances`, {
        history: 1,
        ttl: this.ttlMs,
        replicas: this.config.registry.kvReplicas,
      });
    } catch (err) {
      if (!this.closed) this.logger.warn({ err: (err as Error).message }, 'roster unavailable');
      return;
    }
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.config.instance.heartbeatMs);
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
    };
  }

  private async beat(): Promise<void> {
    if (!this.kv || this.closed || this.nats.state !== 'connected') return;
    const info = this.info();
    this.seen.set(info.id, { info, at: this.clock.now() });
    try {
      await this.kv.put(info.id, JSON.stringify(info));
      this.lastBeatStored = this.clock.now();
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'heartbeat not stored');
    }
  }

  /**
   * Whether the roster itself works: this instance's own heartbeat was stored within the
   * last three beats. While it does not (NATS or JetStream recovering: a leader election
   * after a node restart took longer than three test beats here), a missing heartbeat
   * proves nothing, and nobody is called gone for it.
   */
  get trustworthy(): boolean {
    return this.clock.now() - this.lastBeatStored < this.ttlMs;
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
          try {
            const info = JSON.parse(Buffer.from(e.value).toString('utf8')) as InstanceInfo;
            // A live beat counts from now (no clock skew between hosts); a stored one
            // replayed at start from when it was written.
            const at = e.isUpdate ? this.clock.now() : e.created.getTime();
            this.seen.set(e.key, { info, at });
          } catch {
            // not a roster entry: ignore
          }
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
  private seenAlive(id: string): boolean {
    if (id === this.config.instance.id) return true;
    const s = this.seen.get(id);
    return s !== undefined && this.clock.now() - s.at < this.ttlMs;
  }

  /**
   * Whether `id` may be alive: it heartbeat within the last three beats, or the roster
   * cannot tell (see `trustworthy`; an owner that died is then still caught by "no
   * responders"). The watcher's record answers the common case; before calling an
   * instance gone, the bucket itself is asked, in case the watcher is behind.
   */
  async isAlive(id: string): Promise<boolean> {
    if (this.seenAlive(id) || !this.trustworthy) return true;
    const entry = await this.kv?.get(id).catch(() => null);
    if (entry?.operation !== 'PUT') return false;
    const at = entry.created.getTime();
    if (this.clock.now() - at >= this.ttlMs) return false;
    try {
      this.seen.set(id, { info: entry.json<InstanceInfo>(), at });
    } catch {
      return false;
    }
    return true;
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
        alive: this.seenAlive(info.id),
        self: info.id === self.id,
      }))
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Before the NATS drain: leave the roster while the connection is still up. */
  async beforeApplicationShutdown(): Promise<void> {
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
