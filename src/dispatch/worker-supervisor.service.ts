import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { usableCpus } from '../common/cpu-quota';
import { join } from 'node:path';
import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { Clock } from '../common/clock';
import { Readiness } from '../common/readiness';
import { backoffMs } from '../common/backoff';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { isErrorMeta } from '../meta-registry/meta.schema';
import { MetaStore } from '../meta-registry/meta-store';
import type { MirrorMessage } from '../meta-registry/parent-mirrored-store';
import { serveClaimCall, type MemoryClaims } from '../cache/claims';
import { WorkerClaims } from './worker-claims.providers';
import { FirstStarts } from './first-starts';
import { HeldIndex } from './held-index';
import { IpcChannel } from '../transport/ipc-channel';
import { threadPlan, type ThreadPlan } from './thread-plan';
import type { IpcReportTopic, IpcTopics } from '../transport/ipc-topics';
import type { RankMissing, RanksAsked } from '../routing/local-ranks';

/** The built service entry point; each worker runs it with EPD_DP_WORKER=1. */
const WORKER_MAIN = join(__dirname, '..', 'main.js');
/** A worker that lived this long before dying starts its respawn backoff afresh. */
const STABLE_MS = 30_000;
const IPC_TIMEOUT_MS = 1000;
const EX_CONFIG = 78;

/** One DP rank: the slot a worker process fills, and refills after it dies. */
export class Rank {
  child?: ChildProcess;
  pid?: number;
  channel?: IpcChannel;
  /** Subscribed on NATS and listening: calls may go to it. */
  ready = false;
  /** Calls from this supervisor in flight to it: encodes and control calls alike. */
  pending = 0;
  dispatched = 0;
  restarts = 0;
  lastExitCode: number | null = null;
  startedAt = 0;
  /** Consecutive deaths within STABLE_MS of starting: the respawn backoff's attempt. */
  quickDeaths = 0;
  /** Fails one pending call with the worker's exit code. */
  readonly failers = new Set<(exitCode: number | null) => void>();

  constructor(readonly rank: number) {}

  get alive(): boolean {
    return this.ready && this.child !== undefined;
  }
}

export interface WorkerView {
  dp_rank: number;
  pid: number | null;
  alive: boolean;
  pending: number;
  dispatched: number;
  staged_bytes: number | null;
  restarts: number;
  last_exit_code: number | null;
  /** A live worker that is not ready: what it waits for, or which condition failed. */
  not_ready: Record<string, string> | null;
}

/**
 * EPD_DP_SIZE encoder worker processes under this one: starts them (each with its own NATS
 * connection, ONNX Runtime session, preprocessing pool, staging budget and request
 * state), notices a death at once from the child's exit event, fails that worker's
 * pending calls with SGLang's `DP worker rank={r} died (exitcode={c})` (503), and
 * respawns it with capped backoff. On shutdown it stops respawning, SIGTERMs every worker
 * and SIGKILLs any still running when the grace period ends.
 */
@Injectable()
export class WorkerSupervisor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('WorkerSupervisor');
  readonly ranks: Rank[];
  readonly plan: ThreadPlan;
  private stopping = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /**
   * The req_ids whose embedding each worker process holds, from its records (mirrored
   * over IPC on the memory store, watched in the bucket on JetStream): when it dies,
   * their waiters are told at once.
   */
  private readonly held: HeldIndex;
  readonly claims?: MemoryClaims;
  private changes?: Subscription;
  /** The first start of every rank: the supervisor serves once each is over (first-starts.ts). */
  private readonly starts: FirstStarts;

  constructor(
    private readonly config: AppConfig,
    private readonly registry: MetaRegistry,
    private readonly clock: Clock,
    private readonly store: MetaStore,
    workerClaims: WorkerClaims,
    readiness: Readiness,
  ) {
    this.ranks = Array.from({ length: config.encoder.dpSize }, (_, r) => new Rank(r));
    // As SGLang's and vLLM's DP front ends do, serve once every worker has started, so that
    // a new instance (a rolling restart's) does not take its share of the callers on a part
    // of its workers.
    this.starts = new FirstStarts(this.ranks.length, readiness);
    this.held = new HeldIndex(config.timeouts.sendTimeoutMs);
    // The workers' cache claims, when no shared bucket holds them: one owner per key across ranks.
    this.claims = workerClaims.claims;
    // The pod's CPU limit, not the node's cores: threads beyond the quota are only throttled.
    this.plan = threadPlan(config.encoder.dpSize, usableCpus(), process.env);
  }

  get aliveCount(): number {
    return this.ranks.filter((r) => r.alive).length;
  }

  onApplicationBootstrap(): void {
    if (!existsSync(WORKER_MAIN)) {
      throw new Error(`EPD_DP_SIZE>1 needs the built service (${WORKER_MAIN}): run npm run build`);
    }
    const p = this.plan;
    this.logger.log(
      {
        dp_size: this.ranks.length,
        cores: p.cores,
        intra_op_threads: p.intraOpThreads,
        preprocess_threads: p.preprocessThreads,
        explicit: p.explicit,
      },
      `starting ${this.ranks.length} DP workers on ${p.cores} cores: ${p.intraOpThreads} ONNX Runtime intra-op and ${p.preprocessThreads} preprocessing thread(s) each`,
    );
    for (const r of this.ranks) this.spawn(r);
    // A shared store: the workers' records reach us through the bucket's watcher.
    this.changes = this.store.changes?.subscribe((record) => {
      const { owner } = record;
      if (owner?.instance === this.config.instance.id && owner.pid !== undefined) {
        this.held.record(owner.pid, record, this.clock.now());
      }
    });
  }

  private workerEnv(rank: number): NodeJS.ProcessEnv {
    return {
      ...process.env,
      EPD_DP_WORKER: '1',
      EPD_DP_RANK: String(rank),
      EPD_INSTANCE_ID: this.config.instance.id,
      // Workers serve HTTP on loopback only (their own /health, /admin); callers use ours.
      EPD_HTTP_HOST: '127.0.0.1',
      EPD_HTTP_PORT: '0',
      EPD_SGLANG_BOOTSTRAP_URL: '',
      EPD_INTRA_OP_THREADS: String(this.plan.intraOpThreads),
      EPD_PREPROCESS_THREADS: String(this.plan.preprocessThreads),
    };
  }

  private spawn(r: Rank): void {
    const child = fork(WORKER_MAIN, [], {
      env: this.workerEnv(r.rank),
      stdio: 'inherit',
      execArgv: process.execArgv.filter((a) => !a.startsWith('--inspect')),
    });
    r.child = child;
    r.pid = child.pid;
    r.ready = false;
    r.startedAt = this.clock.now();
    const channel = new IpcChannel(child);
    r.channel = channel;
    channel.handle('ready', () => {
      if (r.child !== child) return;
      r.ready = true;
      this.logger.log({ dp_rank: r.rank, pid: child.pid }, `DP worker rank=${r.rank} is ready`);
      this.starts.ended(r.rank);
    });
    channel.handle('waiting', (w) => {
      if (r.child !== child) return;
      this.starts.waiting(r.rank, w);
      if (w.failed)
        this.logger.error(
          { dp_rank: r.rank, pid: child.pid, failed: w.failed },
          `DP worker rank=${r.rank} will not be ready: ${w.failed}`,
        );
    });
    channel.handle('meta', (m) => this.mirror(r, child.pid, m));
    const claims = this.claims;
    if (claims) channel.handle('claims', (c) => serveClaimCall(claims, c));
    child.once('exit', (code, signal) => this.onExit(r, child, code, signal));
    child.on('error', (err) =>
      this.logger.error({ dp_rank: r.rank, err: err.message }, 'DP worker process error'),
    );
  }

  /** A worker's metadata record lands in this registry, which answers wait_metadata for all. */
  private async mirror(r: Rank, pid: number | undefined, m: MirrorMessage): Promise<void> {
    if (m.op === 'put') {
      const { reqId, metadata, partIdx, owner } = m.record;
      if (pid !== undefined) this.held.record(pid, m.record, this.clock.now());
      await this.registry.publish(reqId, metadata, partIdx, owner);
      return;
    }
    if (pid !== undefined) this.held.remove(pid, m.req_id);
    // Only its own record: the req_id may have been encoded again on another rank since.
    const current = await this.registry.get(m.req_id);
    if (current?.owner?.rank === r.rank && current.owner.pid === pid) {
      await this.registry.discard(m.req_id);
    }
  }

  /** A dead worker's staged embeddings: their records now say they were lost, and why. */
  private async publishLost(r: Rank, pid: number, exitCode: number): Promise<void> {
    const held = this.held.take(pid);
    if (held.length === 0) return;
    const why = `DP worker rank=${r.rank} (pid ${pid}) died with exitcode=${exitCode}`;
    let told = 0;
    for (const reqId of held) {
      const current = await this.registry.get(reqId).catch(() => undefined);
      if (current?.owner?.pid !== pid || isErrorMeta(current.metadata)) continue;
      const { message } = Errors.embeddingLost(reqId, why);
      await this.registry
        .publish(reqId, { error: message }, current.partIdx, current.owner)
        .then(() => told++)
        .catch(() => undefined);
    }
    this.logger.warn(
      { dp_rank: r.rank, pid, lost: told },
      `${told} staged embedding(s) of DP worker rank=${r.rank} were lost with it`,
    );
  }

  private onExit(
    r: Rank,
    child: ChildProcess,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): void {
    if (r.child !== child) return;
    // Python's convention, as SGLang reports it: a signal is its negated number.
    const exitCode = code ?? -(signal ? constants.signals[signal] : 0);
    r.ready = false;
    r.child = undefined;
    r.lastExitCode = exitCode;
    r.channel?.close(`DP worker rank=${r.rank} exited`);
    this.starts.ended(r.rank);
    const failers = [...r.failers];
    r.failers.clear();
    for (const fail of failers) fail(exitCode);
    if (this.stopping) return;
    if (child.pid !== undefined) {
      void this.publishLost(r, child.pid, exitCode);
      // Its encodes in flight are over: the next request for one encodes it, without waiting a lease.
      this.claims?.dropPid(child.pid);
    }
    if (exitCode === EX_CONFIG) {
      // The worker refused this configuration (a model that breaks the contract): every
      // respawn would too. Refuse to serve, as one process does; the other workers see the
      // IPC channel close and shut down.
      process.stderr.write(
        `epd-encoder: DP worker rank=${r.rank} refused the configuration (exit ${EX_CONFIG}); see its message above\n`,
      );
      process.exit(EX_CONFIG);
    }
    const lived = this.clock.now() - r.startedAt;
    r.quickDeaths = lived > STABLE_MS ? 1 : r.quickDeaths + 1;
    const delay = backoffMs(r.quickDeaths, {
      baseMs: 250,
      maxMs: this.config.encoder.dpRespawnMaxMs,
      jitter: 0.2,
    });
    this.logger.error(
      { dp_rank: r.rank, pid: child.pid, exit_code: exitCode, failed_calls: failers.length },
      `DP worker rank=${r.rank} died (exitcode=${exitCode}); respawning in ${delay} ms`,
    );
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.stopping) return;
      r.restarts++;
      this.spawn(r);
    }, delay);
    this.timers.add(timer);
  }

  /**
   * Runs `call` against rank `r`: counted in its pending calls from now until it settles,
   * and failed at once with `DP worker rank={r} died (exitcode={c})` if the worker exits.
   */
  track<T>(r: Rank, reqId: string | undefined, call: () => Promise<T>): Promise<T> {
    r.pending++;
    r.dispatched++;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const finish = () => {
        if (done) return false;
        done = true;
        r.failers.delete(fail);
        r.pending--;
        return true;
      };
      const fail = (exitCode: number | null) => {
        if (finish()) reject(Errors.workerDied(r.rank, exitCode, reqId));
      };
      r.failers.add(fail);
      call().then(
        (v) => finish() && resolve(v),
        (e: unknown) => finish() && reject(e as Error),
      );
    });
  }

  async views(): Promise<WorkerView[]> {
    const stats = new Map((await this.gather('stats')).map((a) => [a.rank, a.value] as const));
    return this.ranks.map((r) => ({
      dp_rank: r.rank,
      pid: r.child ? (r.pid ?? null) : null,
      alive: r.alive,
      pending: r.pending,
      dispatched: r.dispatched,
      staged_bytes: stats.get(r.rank)?.staged_bytes ?? null,
      restarts: r.restarts,
      last_exit_code: r.lastExitCode,
      not_ready: this.notReady(r),
    }));
  }

  /** Why rank `r`'s live worker is not taking calls (its own report), or null. */
  notReady(r: Rank): Record<string, string> | null {
    return r.child && !r.ready ? this.starts.notReady(r.rank) : null;
  }

  /** Asks every live worker over IPC; a worker that does not answer in time is left out. */
  async gather<K extends IpcReportTopic>(
    type: K,
  ): Promise<{ rank: number; value: IpcTopics[K]['reply'] }[]> {
    return (await this.ask(type)).answers;
  }

  /**
   * Asks every worker over IPC: the answers, and for each rank without one, why (not
   * alive, or no answer within IPC_TIMEOUT_MS), so that a view of the ranks says which it
   * leaves out instead of looking complete.
   */
  async ask<K extends IpcReportTopic>(type: K): Promise<RanksAsked<IpcTopics[K]['reply']>> {
    const asked = await Promise.all(
      this.ranks.map(async (r) => {
        if (!r.alive || !r.channel) return { rank: r.rank, reason: 'not alive' };
        return r.channel.request(type, undefined as IpcTopics[K]['request'], IPC_TIMEOUT_MS).then(
          (value) => ({ rank: r.rank, value }),
          (err: unknown) => ({ rank: r.rank, reason: (err as Error).message }),
        );
      }),
    );
    const answers: { rank: number; value: IpcTopics[K]['reply'] }[] = [];
    const missing: RankMissing[] = [];
    for (const a of asked) {
      if ('value' in a) answers.push(a);
      else missing.push({ dp_rank: a.rank, reason: a.reason });
    }
    return { answers, missing };
  }

  /** Stops respawning, SIGTERMs every worker, SIGKILLs the ones left when the grace ends. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.changes?.unsubscribe();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const graceMs = Math.max(500, this.config.shutdown.graceMs - 500);
    await Promise.all(
      this.ranks.map(async (r) => {
        const child = r.child;
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const timer = setTimeout(() => {
          this.logger.warn(
            { dp_rank: r.rank, pid: child.pid },
            'DP worker ignored SIGTERM; killing it',
          );
          child.kill('SIGKILL');
        }, graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}
