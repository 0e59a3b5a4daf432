import { Injectable, Logger } from '@nestjs/common';
import { RequestError, TimeoutError, headers } from '@nats-io/transport-node';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { AppConfig } from '../config/app-config';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import type { Owner } from '../meta-registry/meta-store';
import { NatsConnectionService } from '../transport/nats-connection.service';
import type { NatsContext } from '@nestjs/microservices';
import { instanceSubjectFor, isInstanceSubject, type DpType } from '../transport/subjects';
import { InstanceRoster } from './instance-roster.service';

export interface RouteOptions {
  /** Whether this instance holds state for the req_id (then the call is answered here). */
  isLocal: () => boolean;
  /** The call came in on this instance's own subject: a peer forwarded it here. */
  forwarded?: boolean;
  /**
   * Wait (to the deadline) for the metadata of a req_id nobody has encoded yet, as `send`
   * and `register_destinations` wait today for an encode to start. Without it, an unknown
   * req_id is answered here at once (`release`, `send_status`).
   */
  waitForEncode?: boolean;
}

/**
 * The options of a call arriving at a controller: answered here when this instance holds
 * (or recently released) the req_id, or when a peer forwarded it here already.
 */
export function routeOptions(
  states: { answersFor(reqId: string): boolean },
  reqId: string,
  ctx?: NatsContext,
  waitForEncode = false,
): RouteOptions {
  return {
    isLocal: () => states.answersFor(reqId),
    forwarded: ctx !== undefined && isInstanceSubject(ctx.getSubject()),
    waitForEncode,
  };
}

interface Reply {
  response?: unknown;
  err?: { code?: number; type?: string; message?: string; req_id?: string };
}

/**
 * Owner routing (EPD_REGISTRY_STORE=jetstream): a per-req_id call that reaches an instance
 * which does not hold the req_id's staged embedding is forwarded over NATS to the owner
 * recorded with the metadata, with the remaining deadline, and the owner's answer (value
 * or error) is returned unchanged. Never a silent retry elsewhere: an owner that is gone
 * gives 503 `owner_gone` at once. With the memory store every call is local.
 */
@Injectable()
export class OwnerRouter {
  private readonly logger = new Logger('OwnerRouter');
  private readonly counters = { local: 0, forwarded: 0, ownerGone: 0 };

  constructor(
    private readonly config: AppConfig,
    private readonly registry: MetaRegistry,
    private readonly nats: NatsConnectionService,
    private readonly roster: InstanceRoster,
    private readonly clock: Clock,
  ) {}

  get stats(): { local: number; forwarded: number; ownerGone: number } {
    return { ...this.counters };
  }

  async route<T>(
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
    local: () => Promise<T>,
    options: RouteOptions,
  ): Promise<T> {
    const owner =
      !this.roster.enabled || options.forwarded || options.isLocal()
        ? undefined
        : await this.ownerOf(reqId, deadline, options);
    if (!owner || owner.instance === this.config.instance.id) {
      this.counters.local++;
      return local();
    }
    return this.forward<T>(dp, reqId, body, deadline, owner);
  }

  /** The recorded owner; for a req_id with no metadata yet, optionally waits for it. */
  private async ownerOf(
    reqId: string,
    deadline: number,
    options: RouteOptions,
  ): Promise<Owner | undefined> {
    const record = await this.registry.get(reqId);
    if (record || !options.waitForEncode) return record?.owner;
    const timeoutMs = Math.max(1, deadline - this.clock.now());
    // Any outcome but a record (deadline, a published error) leaves the call here, which
    // answers it as it does today; an {error} record still names its owner.
    const published = await this.registry.wait(reqId, { timeoutMs }).catch(() => undefined);
    if (options.isLocal()) return undefined; // the encode started here meanwhile
    // A wait answered by an {error} record rejects: read that record for its owner.
    return (published ?? (await this.registry.get(reqId).catch(() => undefined)))?.owner;
  }

  private async forward<T>(
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
    owner: Owner,
  ): Promise<T> {
    if (!(await this.roster.isAlive(owner.instance))) throw this.gone(owner, reqId);
    const nc = await this.nats.connection();
    const timeout = Math.max(1, deadline - this.clock.now());
    const subject = instanceSubjectFor(this.config.nats.subjectPrefix, owner.instance, dp);
    const h = headers();
    h.set('Deadline', String(deadline));
    let reply: Reply;
    try {
      const msg = await nc.request(subject, JSON.stringify({ ...body, timeout_ms: timeout }), {
        timeout,
        headers: h,
      });
      reply = msg.json<Reply>();
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders()) throw this.gone(owner, reqId);
      if (err instanceof TimeoutError || (err as Error).cause instanceof TimeoutError) {
        throw Errors.deadlineExceeded(`${dp} forwarded to owner instance ${owner.instance}`, reqId);
      }
      throw err;
    }
    this.counters.forwarded++;
    if (reply.err) {
      const e = reply.err;
      throw new MMError(e.message ?? 'owner failed', e.code ?? 500, e.req_id ?? reqId, e.type);
    }
    return reply.response as T;
  }

  private gone(owner: Owner, reqId: string): MMError {
    this.counters.ownerGone++;
    this.logger.warn({ req_id: reqId, owner: owner.instance }, 'owner instance is gone');
    return Errors.ownerGone(owner.instance, reqId);
  }
}
