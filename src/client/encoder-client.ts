import { context, propagation } from '@opentelemetry/api';
import {
  connect,
  headers as natsHeaders,
  errors as natsErrors,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type ConnectionOptions,
} from '@nats-io/transport-node';
import { backoffMs, sleep } from '../common/backoff';
import { Errors } from '../common/errors/error-catalogue';
import { isErrorBody } from '../common/errors/error-body';
import { MMError } from '../common/errors/mm-error';
import type {
  EmbeddingMeta,
  MetaPayload,
  WaitMetadataResponse,
} from '../meta-registry/meta.schema';
import { requestWithReceipts } from '../transport/receipts';
import { DpType, subjectFor } from '../transport/subjects';
import { TENANT_NAME, tenantSubjectFor } from '../transport/tenant-scope';

/**
 * The caller's trace context (W3C `traceparent`, `tracestate`) as NATS headers, when the
 * application runs OpenTelemetry with a propagator (added to `h`, or to new headers);
 * undefined when there is none and no `h` was given.
 */
function traceHeaders(h?: MsgHdrs): MsgHdrs | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  const keys = Object.keys(carrier);
  if (keys.length === 0) return h;
  h ??= natsHeaders();
  for (const k of keys) h.set(k, carrier[k]!);
  return h;
}

export interface RetryPolicy {
  /** Attempts of wait_metadata in all (only 504s are retried). Default 3. */
  attempts: number;
  /** Backoff before the 2nd attempt; doubles each time. Default 100 ms. */
  baseDelayMs: number;
  /** Backoff cap. Default 2000 ms. */
  maxDelayMs: number;
  /** Fraction of each backoff that is randomised (0..1). Default 0.5. */
  jitter: number;
  /** Pause before the first attempt when has_metadata says "not yet". Default 50 ms. */
  landingDelayMs: number;
}

export interface EncoderClientOptions {
  /** An existing connection (not closed by the client), or servers to connect to. */
  connection?: NatsConnection;
  servers?: string | string[];
  connectOptions?: Partial<ConnectionOptions>;
  subjectPrefix?: string;
  /**
   * Act as this tenant (docs/threat-model.md): calls go to `<prefix>.v1.t.<tenant>.<dp_type>`,
   * and their req_ids are this tenant's own, out of reach of callers outside it. Unset:
   * the shared subjects.
   */
  tenant?: string;
  /** Deadline of calls other than waits. Default 10 s. */
  requestTimeoutMs?: number;
  /** Extra time a wait's NATS request gets beyond its server-side deadline. Default 1 s. */
  replySlackMs?: number;
  retry?: Partial<RetryPolicy>;
  /**
   * Ask the encoder for a receipt on every call (default true; docs/nats.md "Receipts"):
   * a call lost in transit by NATS (a node loss) is sent again after 300 ms, an answer lost
   * in transit is asked for again, and a call nobody takes fails within about a second
   * with 503 `unacknowledged` instead of waiting for its deadline. An encode is never sent
   * twice before it was taken (it must not run on two instances). Set false only against
   * an encoder older than the receipt protocol, which would look unreachable.
   */
  receipts?: boolean;
  /** Injectable for tests; defaults to Math.random. */
  random?: () => number;
}

export interface WaitMetadataOptions {
  /** Server-side deadline of each attempt. Default: the server's EPD_REQ_TIMEOUT_MS. */
  timeoutMs?: number;
  partIdx?: number;
  /** Overrides the client's retry policy for this call; `0` or `1` disables retries. */
  retries?: number;
  signal?: AbortSignal;
  /** Called before each attempt (1-based); for logs and metrics. */
  onAttempt?: (attempt: number) => void;
}

/** An `encode` body (docs/contract.md §2); items are data URIs, bare base64, URLs or files. */
export interface EncodeBody {
  req_id: string;
  modality: 'image' | 'video' | 'audio';
  mm_items: (string | { url: string; content_hash?: string })[];
  num_parts?: number;
  part_idx?: number;
  timeout_ms?: number;
  prefill_host?: string;
  embedding_port?: number | number[];
}

/** What `encode` answers once the embedding is staged (and delivered, if asked). */
export interface EncodeResult {
  req_id: string;
  part_idx: number;
  embedding_size: number;
  embedding_len: number;
  embedding_dim: number;
  timings: Record<string, number>;
}

const DEFAULT_RETRY: RetryPolicy = {
  attempts: 3,
  baseDelayMs: 100,
  maxDelayMs: 2000,
  jitter: 0.5,
  landingDelayMs: 50,
};

interface Reply<T> {
  id?: string;
  response?: T;
  err?: unknown;
}

/**
 * Client of the encoder's NATS API, usable without Nest. Every call has a deadline;
 * every failure is an MMError whose `code` is the HTTP status the server would use.
 */
export class EncoderClient {
  private readonly prefix: string;
  private readonly tenant: string | undefined;
  private readonly requestTimeoutMs: number;
  private readonly replySlackMs: number;
  private readonly retry: RetryPolicy;
  private readonly random: () => number;
  private readonly receipts: boolean;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    options: EncoderClientOptions,
  ) {
    this.prefix = options.subjectPrefix ?? 'epd';
    if (options.tenant !== undefined && !TENANT_NAME.test(options.tenant))
      throw new Error(
        `tenant must be 1-64 of [A-Za-z0-9_-], got ${JSON.stringify(options.tenant)}`,
      );
    this.tenant = options.tenant;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.replySlackMs = options.replySlackMs ?? 1_000;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.random = options.random ?? Math.random;
    this.receipts = options.receipts ?? true;
  }

  static async connect(options: EncoderClientOptions = {}): Promise<EncoderClient> {
    if (options.connection) return new EncoderClient(options.connection, false, options);
    const nc = await connect({
      servers: options.servers ?? 'nats://127.0.0.1:4222',
      ...options.connectOptions,
    });
    return new EncoderClient(nc, true, options);
  }

  /** Encodes and stages `body`'s media; the embedding stays staged until released or sent. */
  encode(body: EncodeBody, options: { timeoutMs?: number } = {}): Promise<EncodeResult> {
    const timeoutMs = options.timeoutMs ?? body.timeout_ms ?? this.requestTimeoutMs;
    return this.call<EncodeResult>(
      DpType.Encode,
      { num_parts: 1, part_idx: 0, ...body, timeout_ms: timeoutMs },
      timeoutMs + this.replySlackMs,
    );
  }

  async publishMetadata(
    reqId: string,
    metadata: MetaPayload,
    options: { partIdx?: number } = {},
  ): Promise<void> {
    await this.call(DpType.PublishMetadata, {
      req_id: reqId,
      part_idx: options.partIdx,
      metadata,
    });
  }

  async hasMetadata(reqId: string): Promise<boolean> {
    const reply = await this.call<{ present: boolean }>(DpType.HasMetadata, { req_id: reqId });
    return reply.present;
  }

  async release(reqId: string): Promise<void> {
    await this.call(DpType.Release, { req_id: reqId });
  }

  /**
   * Delivers the staged embedding of `reqId` to the receiver at `host:port` and resolves
   * with the bytes it acked. With `receiveCount`, the embedding is released once that
   * many receivers have acked.
   */
  send(
    reqId: string,
    to: { host: string; port: number },
    options: { receiveCount?: number; timeoutMs?: number } = {},
  ): Promise<{ req_id: string; bytes: number; acked: true }> {
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    return this.call(
      DpType.Send,
      {
        req_id: reqId,
        prefill_host: to.host,
        embedding_port: to.port,
        receive_count: options.receiveCount,
        timeout_ms: timeoutMs,
      },
      timeoutMs + this.replySlackMs,
    );
  }

  /**
   * Waits for the metadata of `reqId`, with the retry that troubleshooting guides give for
   * "encode metadata not ready": if has_metadata says it is not there yet, pause briefly
   * so an in-flight publish can land; then up to `attempts` waits, retrying only on 504,
   * with exponential backoff and jitter. Any other error is thrown at once.
   */
  async waitMetadata(
    reqId: string,
    options: WaitMetadataOptions = {},
  ): Promise<WaitMetadataResponse> {
    const attempts = Math.max(1, options.retries ?? this.retry.attempts);
    if (!(await this.hasMetadata(reqId)))
      await sleep(this.retry.landingDelayMs, options.signal, Errors.waitCancelled);
    for (let attempt = 1; ; attempt++) {
      options.onAttempt?.(attempt);
      try {
        return await this.call<WaitMetadataResponse>(
          DpType.WaitMetadata,
          { req_id: reqId, part_idx: options.partIdx, timeout_ms: options.timeoutMs },
          (options.timeoutMs ?? this.requestTimeoutMs) + this.replySlackMs,
        );
      } catch (err) {
        if (!(err instanceof MMError) || err.code !== 504 || attempt >= attempts) throw err;
        await sleep(this.backoffMs(attempt), options.signal, Errors.waitCancelled);
      }
    }
  }

  async close(): Promise<void> {
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.drain();
  }

  get connection(): NatsConnection {
    return this.nc;
  }

  private backoffMs(attempt: number): number {
    const { baseDelayMs, maxDelayMs, jitter } = this.retry;
    return backoffMs(attempt, { baseMs: baseDelayMs, maxMs: maxDelayMs, jitter }, this.random);
  }

  private async call<T>(
    dpType: string,
    data: object,
    timeoutMs = this.requestTimeoutMs,
  ): Promise<T> {
    const subject =
      this.tenant === undefined
        ? subjectFor(this.prefix, dpType)
        : tenantSubjectFor(this.prefix, this.tenant, dpType);
    const reqId = (data as { req_id?: string }).req_id;
    let raw: Msg;
    try {
      raw = this.receipts
        ? await this.withReceipts(dpType, subject, data, timeoutMs, reqId)
        : await this.nc.request(subject, JSON.stringify(data), {
            timeout: timeoutMs,
            headers: traceHeaders(),
          });
    } catch (err) {
      throw err instanceof MMError ? err : this.transportError(err, dpType, subject, reqId);
    }
    const reply = raw.json<Reply<T>>();
    if (reply.err !== undefined && reply.err !== null) {
      if (isErrorBody(reply.err))
        throw Errors.remote(reply.err.message, reply.err.code, reqId, reply.err.type);
      throw Errors.unexpectedReply(subject, JSON.stringify(reply.err), reqId);
    }
    return reply.response as T;
  }

  /** One call under the receipt protocol (src/transport/receipts.ts): its answer, or why not. */
  private async withReceipts(
    dpType: string,
    subject: string,
    data: object,
    timeoutMs: number,
    reqId: string | undefined,
  ): Promise<Msg> {
    const started = Date.now();
    const serverMs = (data as { timeout_ms?: number }).timeout_ms;
    // A body over the server's max_payload: nats.js refuses the publish, and the call
    // rejects with that error (transportError makes it the 413).
    const outcome = await requestWithReceipts(this.nc, {
      subject,
      deadline: started + timeoutMs,
      now: () => Date.now(),
      // A send made later carries what is left of the server-side deadline.
      body: () => {
        const elapsed = Date.now() - started;
        return JSON.stringify(
          serverMs === undefined || elapsed === 0
            ? data
            : { ...data, timeout_ms: Math.max(1, serverMs - elapsed) },
        );
      },
      headers: (h) => traceHeaders(h),
      // Before a receipt, no responders is what it was without receipts: none serving. A
      // probe that meets none may only be moving to another node, unless every one does.
      gone: (final, taken) => !taken || final,
      resend: dpType !== DpType.Encode,
    });
    switch (outcome.kind) {
      case 'answer':
        return outcome.msg;
      case 'gone':
        throw Errors.noResponders(subject, reqId);
      case 'unreachable':
        throw Errors.unacknowledged(subject, reqId, outcome.received);
      case 'deadline':
        throw dpType === DpType.WaitMetadata
          ? Errors.metadataNotReady(reqId)
          : Errors.deadlineExceeded(dpType, reqId);
    }
  }

  private transportError(err: unknown, dpType: string, subject: string, reqId?: string): MMError {
    const noResponders =
      err instanceof natsErrors.NoRespondersError ||
      (err instanceof natsErrors.RequestError && err.isNoResponders());
    if (noResponders) {
      // None running, or every one out of the queue group while it sheds load
      // (EPD_OVERLOAD_STEP_OUT): either way, NATS answered at once and a retry may succeed.
      return Errors.noResponders(subject, reqId);
    }
    if (err instanceof natsErrors.TimeoutError) {
      return dpType === DpType.WaitMetadata
        ? Errors.metadataNotReady(reqId)
        : Errors.deadlineExceeded(dpType, reqId);
    }
    if (err instanceof natsErrors.InvalidArgumentError && /max_payload/.test(err.message)) {
      return Errors.overMaxPayload(dpType, reqId);
    }
    if (
      err instanceof natsErrors.ClosedConnectionError ||
      err instanceof natsErrors.DrainingConnectionError
    ) {
      return Errors.connectionClosed(reqId);
    }
    return Errors.transportFailed(dpType, (err as Error).message, reqId);
  }
}

export type { EmbeddingMeta, MetaPayload, WaitMetadataResponse };
