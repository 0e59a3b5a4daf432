import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { AppConfig } from '../config/app-config';
import type { EncodeRequest } from '../encoder/encode-request.schema';
import type { EncodeResponse } from '../encoder/encode-response';
import { isErrorMeta } from '../meta-registry/meta.schema';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import type { Owner } from '../meta-registry/meta-store';
import { ReqStateStore } from '../requests/req-state.store';
import { LocalRanks, type RanksAsked } from '../routing/local-ranks';
import type { IpcCall } from '../transport/ipc-rpc.server';
import { DpType } from '../transport/subjects';
import { WorkerSupervisor, type Rank } from './worker-supervisor.service';
import { currentTraceparent } from '../tracing/tracing';
import type { IpcReportTopic, IpcTopics } from '../transport/ipc-topics';

/** One rank's answer to a broadcast: its value, or the error it (or its absence) gave. */
export interface RankAnswer<T> {
  rank: number;
  value?: T;
  error?: MMError;
}

/**
 * Dispatch to DP workers, and the LocalRanks of owner routing.
 *
 * - `encode` goes to the alive rank with the fewest pending calls (encodes and control
 *   calls alike) under EPD_MAX_PENDING; ties go to a global round-robin cursor that is
 *   never reset. A req_id whose embedding a live rank still holds goes back to that rank,
 *   which answers a duplicate with 409 as one process would; one still being dispatched
 *   gets 409 here, whichever rank has it.
 * - Every call reaches its worker over the fork's IPC channel (the worker's second Nest
 *   transport: the same handlers as its NATS subjects), counted in its pending calls and
 *   failed at once if it dies.
 * - Broadcasts go to every alive rank at once under one deadline.
 */
@Injectable()
export class DpDispatcher extends LocalRanks {
  readonly active = true;
  private readonly logger = new Logger('DpDispatcher');
  /** Encodes dispatched and not answered yet: at most EPD_MAX_PENDING per rank. */
  private readonly inflight = new Map<string, Owner>();
  private cursor = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly supervisor: WorkerSupervisor,
    private readonly registry: MetaRegistry,
    private readonly states: ReqStateStore,
    private readonly clock: Clock,
  ) {
    super();
    // Workers check EPD_ADMIN_TOKEN on admin patterns as every process does: the caller's
    // token was checked here, so the supervisor presents the one it shares with them.
    if (config.admin.token) this.authorization = `Bearer ${config.admin.token}`;
  }

  private readonly authorization?: string;

  get inflightCount(): number {
    return this.inflight.size;
  }

  override inflightOwner(reqId: string): Owner | undefined {
    return this.inflight.get(reqId);
  }

  async encode(raw: object, req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    const reqId = req.req_id;
    if (this.inflight.has(reqId)) throw Errors.duplicateActive(reqId);
    if (this.states.takeTombstone(reqId)) {
      // Released before any rank saw it, as one process answers (and tells its waiters).
      await this.publishError(reqId, req.part_idx, Errors.releasedBeforeEncode(reqId).message);
      throw Errors.releasedBeforeEncode(reqId);
    }
    const rank = (await this.holder(reqId)) ?? this.pick(reqId);
    const owner: Owner = { instance: this.config.instance.id, rank: rank.rank, pid: rank.pid };
    this.inflight.set(reqId, owner);
    try {
      return await this.callRank<EncodeResponse>(rank, DpType.Encode, reqId, raw, deadline);
    } catch (err) {
      // The worker died with it: its waiters learn why now, not at their deadline.
      if (err instanceof MMError && err.type === 'worker_died') {
        await this.publishError(reqId, req.part_idx, err.message);
      }
      throw err;
    } finally {
      if (this.inflight.get(reqId) === owner) this.inflight.delete(reqId);
    }
  }

  /** The live rank that holds `reqId`'s embedding now (it answers a duplicate with 409). */
  private async holder(reqId: string): Promise<Rank | undefined> {
    const record = await this.registry.get(reqId).catch(() => undefined);
    const owner = record?.owner;
    if (!owner || isErrorMeta(record.metadata) || owner.instance !== this.config.instance.id) {
      return undefined;
    }
    return this.liveRank(owner);
  }

  /** The rank `owner` names, if the very process that recorded it (by pid) still runs. */
  private liveRank(owner: Owner): Rank | undefined {
    const rank = owner.rank === undefined ? undefined : this.supervisor.ranks[owner.rank];
    const same = owner.pid === undefined || rank?.pid === owner.pid;
    return rank?.alive && same ? rank : undefined;
  }

  /** Least pending among the alive ranks under the cap; ties by the global cursor. */
  private pick(reqId: string): Rank {
    const alive = this.supervisor.ranks.filter((r) => r.alive);
    if (alive.length === 0) throw Errors.allWorkersDead(reqId);
    const max = this.config.encoder.maxPending;
    const open = alive.filter((r) => r.pending < max);
    if (open.length === 0) throw Errors.allWorkersAtCapacity(alive.length, max, reqId);
    const least = Math.min(...open.map((r) => r.pending));
    const tied = open.filter((r) => r.pending === least);
    return tied[this.cursor++ % tied.length]!;
  }

  override call<T>(
    owner: Owner,
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
  ): Promise<T> {
    const rank = this.liveRank(owner);
    if (!rank) {
      const who = `DP worker rank=${owner.rank} (pid ${owner.pid ?? '?'}) is gone`;
      return Promise.reject(Errors.embeddingLost(reqId, who));
    }
    return this.callRank<T>(rank, dp, reqId, body, deadline);
  }

  override ask<K extends IpcReportTopic>(type: K): Promise<RanksAsked<IpcTopics[K]['reply']>> {
    return this.supervisor.ask(type);
  }

  private callRank<T>(
    rank: Rank,
    dp: DpType,
    reqId: string | undefined,
    body: object,
    deadline: number,
  ): Promise<T> {
    const channel = rank.channel;
    if (!channel)
      return Promise.reject(Errors.workerNotAnswering(rank.rank, 'no IPC channel', reqId));
    const call: IpcCall = {
      pattern: dp,
      data: body,
      deadline,
      authorization: this.authorization,
      traceparent: currentTraceparent(),
    };
    const timeoutMs = Math.max(1, deadline - this.clock.now());
    const timeout = () => Errors.deadlineExceeded(`${dp} on DP worker rank=${rank.rank}`, reqId);
    return this.supervisor.track(rank, reqId, () =>
      (channel.request('rpc', call, timeoutMs, timeout) as Promise<T>).catch((err: unknown) => {
        if (err instanceof MMError) throw err;
        throw Errors.workerNotAnswering(rank.rank, (err as Error).message, reqId);
      }),
    );
  }

  /**
   * `dp` on every alive rank at once, all under one deadline. 503 `All encoder DP workers
   * are dead.` when none is alive; otherwise one answer per alive rank, failures included.
   */
  async broadcast<T>(dp: DpType, body: object, timeoutMs: number): Promise<RankAnswer<T>[]> {
    const alive = this.supervisor.ranks.filter((r) => r.alive);
    if (alive.length === 0) throw Errors.allWorkersDead();
    const deadline = this.clock.now() + timeoutMs;
    return Promise.all(
      alive.map((r) =>
        this.callRank<T>(r, dp, undefined, body, deadline).then(
          (value) => ({ rank: r.rank, value }),
          (err: unknown) => ({
            rank: r.rank,
            error: err instanceof MMError ? err : Errors.remote((err as Error).message, 500),
          }),
        ),
      ),
    );
  }

  private async publishError(reqId: string, partIdx: number, message: string): Promise<void> {
    await this.registry
      .publish(reqId, { error: message }, partIdx, this.registry.self)
      .catch((err: unknown) =>
        this.logger.warn(
          { req_id: reqId, err: (err as Error).message },
          'could not publish error metadata',
        ),
      );
  }
}

/**
 * A broadcast's answers as one reply: a line per rank (`dp_rank=N: …`, SGLang's form) and
 * the worst per-rank status, thrown as that status when any rank failed.
 */
export function mergeRankAnswers<T>(
  answers: RankAnswer<T>[],
  describe: (value: T) => string,
): string {
  const lines = answers.map((a) =>
    a.error
      ? `dp_rank=${a.rank}: ${a.error.code} ${a.error.message}`
      : `dp_rank=${a.rank}: ${describe(a.value as T)}`,
  );
  const failed = answers.filter((a) => a.error);
  if (failed.length === 0) return lines.join('\n');
  const worst = failed.reduce((w, a) => (a.error!.code > w.error!.code ? a : w));
  throw Errors.remote(lines.join('\n'), worst.error!.code, undefined, worst.error!.type);
}
