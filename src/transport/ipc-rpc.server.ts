import { Errors } from '../common/errors/error-catalogue';
import { headers } from '@nats-io/transport-node';
import { NatsContext, Server, type CustomTransportStrategy } from '@nestjs/microservices';
import { AppConfig } from '../config/app-config';
import { Readiness } from '../common/readiness';
import { ParentLink } from './parent-link';
import { instanceRankSubjectFor } from './subjects';
import { contextFromNats, withContext } from '../tracing/tracing';
import type { IpcTopic } from './ipc-topics';

/** A call from the DP supervisor: one dp_type, its payload, and what its headers would carry. */
export interface IpcCall {
  pattern: string;
  data: unknown;
  /** Epoch ms: the `Deadline` header. */
  deadline: number;
  /** The caller's `Authorization` header, for admin patterns. */
  authorization?: string;
  /** The supervisor's trace context (W3C), when tracing is on. */
  traceparent?: string;
}

interface ErrorBody {
  code?: number;
  type?: string;
  message?: string;
  req_id?: string | null;
}

/**
 * A DP worker's second Nest transport: the same @MessagePattern handlers as on NATS (same
 * pipes, guards and exception filter), called by its supervisor over the fork's IPC
 * channel. Dispatch does not depend on NATS then (HTTP encodes keep working while NATS is
 * down, as in one process), has no payload limit, and skips nats-server's two deliveries
 * per call. Handlers see a NatsContext on the worker's instance rank subject, so a call
 * counts as forwarded (answered here) and its deadline and token arrive as headers.
 */
export class IpcRpcServer extends Server implements CustomTransportStrategy {
  constructor(
    private readonly link: ParentLink,
    private readonly config: AppConfig,
    private readonly readiness: Readiness,
  ) {
    super();
  }

  listen(callback: () => void): void {
    this.link.handle('rpc', (payload) => this.call(payload));
    // Tell the supervisor once this worker's conditions hold (its models loaded, its store
    // open), so that it sends no call to a worker still loading; not its NATS subscriptions
    // (NATS may be down, and HTTP encodes go on through the supervisor then).
    void this.readiness.whenReady().then(() => this.link.ready());
    // Until then, what it waits for, at once and each time a condition is met or fails: the
    // supervisor's /health/ready and /admin/workers say it, rank by rank (a model that does
    // not load is named there, not only in this worker's log).
    const report = () => {
      if (!this.readiness.ready)
        this.link.waiting(this.readiness.waitingFor, this.readiness.failed);
    };
    this.readiness.onChange(report);
    report();
    callback();
  }

  private call(c: IpcCall): Promise<unknown> {
    const handler = this.getHandlerByPattern(c.pattern);
    if (!handler) return Promise.reject(Errors.noHandler(c.pattern));
    const h = headers();
    h.set('Deadline', String(c.deadline));
    if (c.authorization) h.set('Authorization', c.authorization);
    if (c.traceparent) h.set('traceparent', c.traceparent);
    const { subjectPrefix } = this.config.nats;
    const subject = instanceRankSubjectFor(
      subjectPrefix,
      this.config.instance.id,
      this.config.encoder.dpRank,
      c.pattern,
    );
    const ctx = new NatsContext([subject, h]);
    return new Promise((resolve, reject) => {
      // Nest reports the first value, then the stream's end: the first packet answers.
      let answered = false;
      const trace = c.traceparent ? contextFromNats(h) : undefined;
      withContext(trace, () =>
        this.handleRequest(
          ctx,
          async () => this.transformToObservable(await handler(c.data, ctx)),
          (packet) => {
            if (answered) return;
            answered = true;
            if (packet.err === undefined) return resolve(packet.response ?? null);
            const e = packet.err as ErrorBody;
            reject(
              Errors.remote(e.message ?? 'failed', e.code ?? 500, e.req_id ?? undefined, e.type),
            );
          },
        ),
      );
    });
  }

  on(): void {}

  unwrap<T>(): T {
    throw new Error('the IPC transport has no client to unwrap');
  }

  close(): void {}
}

declare module './ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: one @MessagePattern call (its reply is the handler's). */
    rpc: IpcTopic<IpcCall, unknown>;
  }
}
