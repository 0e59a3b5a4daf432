import { Clock } from '../../common/clock';
import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import { Errors } from '../../common/errors/error-catalogue';
import { InstanceRoster } from '../../routing/instance-roster.service';
import { MetricsSource, type MetricsJson } from '../metrics-source';

/** One second of the service, as the dashboard shows it. */
export interface Snapshot {
  t: number;
  registry: { entries: number; waiters: number };
  staging: { bytes: number; active: number; oldestAgeS: number };
  queue: { depth: number; pending: number; nats: number };
  /** wait_metadata: totals by outcome; p50/p99 (s) of the answered waits of the last interval. */
  wait: {
    ok: number;
    timeout: number;
    error: number;
    cancelled: number;
    p50: number | null;
    p99: number | null;
    timeoutsPerS: number;
  };
  encode: { success: number; error: number; rejected: number; perS: number };
  /** Failures of the last minute by error type (encodes, 504 waits, shed calls). */
  errors: { type: string; count: number }[];
  ranks: { rank: string; active: number; stagedBytes: number; queue: number; encodes: number }[];
  instances: { id: string; alive: boolean; lastHeartbeatMsAgo: number; self: boolean }[];
  /** The models served (the default vision model first), and each one's encodes by outcome. */
  models: {
    name: string;
    family: string;
    reference: boolean;
    success: number;
    error: number;
    rejected: number;
  }[];
  /** The autoscaling signal: encoders wanted, live instances, utilization (none in DP). */
  scaling: { desired: number; instances: number; utilization: number } | null;
}

interface Tick {
  snapshot: Snapshot;
  /** Cumulative buckets of ok waits (le → count), and failure totals by type. */
  okBuckets: Map<number, number>;
  failures: Map<string, number>;
}

type Labels = Record<string, string | number>;

const TICK_MS = 1000;
/** Snapshots kept for a page that connects (5 minutes). */
const HISTORY = 300;
/** Concurrent event streams; more are refused with 503. */
export const MAX_STREAMS = 16;
const WINDOW_TICKS = 60;

/** epd_encoder_model_info's models, each with its epd_encoder_model_requests_total by status. */
function modelsOf(json: MetricsJson): Snapshot['models'] {
  const byName = new Map<string, Snapshot['models'][number]>();
  for (const v of series(json, 'epd_encoder_model_info')) {
    const name = String(v.labels.name);
    if (!byName.has(name))
      byName.set(name, {
        name,
        family: String(v.labels.family),
        reference: v.labels.reference === 'true',
        success: 0,
        error: 0,
        rejected: 0,
      });
  }
  for (const v of series(json, 'epd_encoder_model_requests_total')) {
    const m = byName.get(String(v.labels.model));
    const status = String(v.labels.status);
    if (m && (status === 'success' || status === 'error' || status === 'rejected'))
      m[status] += v.value;
  }
  return [...byName.values()];
}

function series(json: MetricsJson, name: string): { labels: Labels; value: number }[] {
  for (const m of json) {
    if (m.name === name) return m.values as { labels: Labels; value: number }[];
  }
  return [];
}

function total(json: MetricsJson, name: string, where: Labels = {}, valueName?: string): number {
  let n = 0;
  for (const m of json) {
    if (m.name !== name) continue;
    for (const v of m.values) {
      if (valueName !== undefined && (v as { metricName?: string }).metricName !== valueName)
        continue;
      const labels = v.labels as Labels;
      if (Object.entries(where).every(([k, w]) => String(labels[k]) === String(w))) n += v.value;
    }
  }
  return n;
}

/** Cumulative histogram buckets (le → count) of one family, summed over its series. */
function buckets(json: MetricsJson, name: string, where: Labels): Map<number, number> {
  const out = new Map<number, number>();
  for (const m of json) {
    if (m.name !== name) continue;
    for (const v of m.values) {
      if ((v as { metricName?: string }).metricName !== `${name}_bucket`) continue;
      const labels = v.labels as Labels;
      if (!Object.entries(where).every(([k, w]) => String(labels[k]) === String(w))) continue;
      const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
      out.set(le, (out.get(le) ?? 0) + v.value);
    }
  }
  return out;
}

/**
 * The q-quantile of the observations between two cumulative bucket readings, linearly
 * interpolated within its bucket (as Prometheus' histogram_quantile); null without any.
 */
export function quantile(q: number, now: Map<number, number>, before?: Map<number, number>) {
  const bounds = [...now.keys()].sort((a, b) => a - b);
  const delta = bounds.map((le) => Math.max(0, (now.get(le) ?? 0) - (before?.get(le) ?? 0)));
  const count = delta[delta.length - 1] ?? 0;
  if (count === 0) return null;
  const rank = q * count;
  for (let i = 0; i < bounds.length; i++) {
    if (delta[i]! < rank) continue;
    const upper = bounds[i]!;
    const lower = i === 0 ? 0 : bounds[i - 1]!;
    if (upper === Infinity) return lower;
    const below = i === 0 ? 0 : delta[i - 1]!;
    const inBucket = delta[i]! - below;
    return inBucket === 0 ? upper : lower + ((upper - lower) * (rank - below)) / inBucket;
  }
  return null;
}

/**
 * The live view behind /admin/ui: one snapshot a second, read from the same metrics as
 * /metrics (every rank's, on a DP supervisor), while at least one page is connected.
 * Keeps the last five minutes for a page that connects, and at most MAX_STREAMS streams.
 */
@Injectable()
export class DashboardService implements OnModuleDestroy {
  private readonly history: Tick[] = [];
  private readonly ticks = new Subject<Snapshot>();
  private timer?: NodeJS.Timeout;
  private streams = 0;
  private ticking = false;

  constructor(
    private readonly source: MetricsSource,
    private readonly roster: InstanceRoster,
    private readonly clock: Clock,
  ) {}

  get openStreams(): number {
    return this.streams;
  }

  /** History first, then a snapshot a second. 503 beyond MAX_STREAMS open streams. */
  stream(): Observable<{ type: 'history' | 'snapshot'; data: Snapshot[] | Snapshot }> {
    if (this.streams >= MAX_STREAMS) throw Errors.tooManyStreams(MAX_STREAMS);
    return new Observable((subscriber) => {
      this.streams++;
      this.start();
      subscriber.next({ type: 'history', data: this.history.map((h) => h.snapshot) });
      const sub = this.ticks.subscribe((snapshot) =>
        subscriber.next({ type: 'snapshot', data: snapshot }),
      );
      return () => {
        sub.unsubscribe();
        this.streams--;
        if (this.streams === 0) this.stop();
      };
    });
  }

  /** Reads the metrics once and appends a snapshot (what each tick runs). */
  async tick(): Promise<Snapshot> {
    const tick = await this.read();
    this.history.push(tick);
    if (this.history.length > HISTORY) this.history.shift();
    return tick.snapshot;
  }

  /** A snapshot now, without recording it (`GET /admin/status`, `epd status`). */
  async current(): Promise<Snapshot> {
    return (await this.read()).snapshot;
  }

  private async read(): Promise<Tick> {
    const json = await this.source.json();
    const prev = this.history[this.history.length - 1];
    const windowStart = this.history[Math.max(0, this.history.length - WINDOW_TICKS)];
    const t = this.clock.now();
    const seconds = prev ? Math.max(0.001, (t - prev.snapshot.t) / 1000) : 1;
    const okBuckets = buckets(json, 'epd_encoder_wait_metadata_seconds', { outcome: 'ok' });
    const wait = (outcome: string) => total(json, 'epd_encoder_wait_metadata_total', { outcome });
    const encodes = (status: string) => total(json, 'epd_encoder_requests_total', { status });

    const failures = new Map<string, number>();
    for (const v of series(json, 'epd_encoder_requests_total')) {
      if (v.labels.status === 'success') continue;
      const type = String(v.labels.type);
      failures.set(type, (failures.get(type) ?? 0) + v.value);
    }
    failures.set('metadata_not_ready', wait('timeout'));
    failures.set('overloaded', total(json, 'epd_encoder_nats_shed_total'));

    const ranks = new Map<string, Snapshot['ranks'][number]>();
    const row = (labels: Labels) => {
      const rank = String(labels.dp_rank ?? '0');
      let r = ranks.get(rank);
      if (!r) ranks.set(rank, (r = { rank, active: 0, stagedBytes: 0, queue: 0, encodes: 0 }));
      return r;
    };
    for (const v of series(json, 'epd_encoder_active_requests')) row(v.labels).active += v.value;
    for (const v of series(json, 'epd_encoder_staged_bytes')) row(v.labels).stagedBytes += v.value;
    for (const v of series(json, 'epd_encoder_queue_depth')) row(v.labels).queue += v.value;
    for (const v of series(json, 'epd_encoder_requests_total'))
      if (v.labels.status === 'success') row(v.labels).encodes += v.value;

    const snapshot: Snapshot = {
      t,
      registry: {
        entries: total(json, 'epd_encoder_registry_entries'),
        waiters: total(json, 'epd_encoder_registry_waiters'),
      },
      staging: {
        bytes: total(json, 'epd_encoder_staged_bytes'),
        active: total(json, 'epd_encoder_active_requests'),
        oldestAgeS: Math.max(
          0,
          ...series(json, 'epd_encoder_staged_oldest_age_seconds').map((v) => v.value),
        ),
      },
      queue: {
        depth: total(json, 'epd_encoder_queue_depth'),
        pending: total(json, 'epd_encoder_pending_requests'),
        nats: total(json, 'epd_encoder_nats_queue_depth'),
      },
      wait: {
        ok: wait('ok'),
        timeout: wait('timeout'),
        error: wait('error'),
        cancelled: wait('cancelled'),
        p50: quantile(0.5, okBuckets, prev?.okBuckets),
        p99: quantile(0.99, okBuckets, prev?.okBuckets),
        timeoutsPerS: prev
          ? Math.max(0, wait('timeout') - prev.snapshot.wait.timeout) / seconds
          : 0,
      },
      encode: {
        success: encodes('success'),
        error: encodes('error'),
        rejected: encodes('rejected'),
        perS: prev ? Math.max(0, encodes('success') - prev.snapshot.encode.success) / seconds : 0,
      },
      errors: [...failures]
        .map(([type, n]) => ({ type, count: n - (windowStart?.failures.get(type) ?? 0) }))
        .filter((e) => e.count > 0)
        .sort((a, b) => b.count - a.count),
      ranks: [...ranks.values()].sort((a, b) => Number(a.rank) - Number(b.rank)),
      instances: this.roster.list().map((i) => ({
        id: i.id,
        alive: i.alive,
        lastHeartbeatMsAgo: i.last_heartbeat_ms_ago,
        self: i.self,
      })),
      models: modelsOf(json),
      scaling: null,
    };
    const desired = series(json, 'epd_encoder_desired_replicas')[0];
    snapshot.scaling = desired
      ? {
          desired: desired.value,
          instances: total(json, 'epd_encoder_cluster_instances'),
          utilization: total(json, 'epd_encoder_cluster_utilization'),
        }
      : null;
    return { snapshot, okBuckets, failures };
  }

  private start(): void {
    if (this.timer) return;
    const run = () => {
      if (this.ticking) return; // a slow read (a worker not answering) is not stacked
      this.ticking = true;
      this.tick()
        .then((s) => this.ticks.next(s))
        .catch(() => undefined)
        .finally(() => (this.ticking = false));
    };
    run();
    this.timer = setInterval(run, TICK_MS);
    this.timer.unref();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  onModuleDestroy(): void {
    this.stop();
    this.ticks.complete();
  }
}
