import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import type { IpcTopics, TopicMap } from './ipc-topics';

/** One end of a Node IPC channel: a forked ChildProcess, or `process` inside the child. */
export interface IpcPeer {
  send?(message: unknown, callback?: (err: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

interface Envelope {
  epd: 1;
  kind: 'req' | 'res' | 'note';
  type: string;
  id?: number;
  payload?: unknown;
  error?: string;
  /** An MMError's status, type and req_id, so the caller rethrows the same error. */
  code?: number;
  errorType?: string;
  reqId?: string;
}

type Handler = (payload: unknown) => unknown;

const isEnvelope = (m: unknown): m is Envelope =>
  typeof m === 'object' && m !== null && (m as Envelope).epd === 1;

/**
 * Request/response and notifications between a DP supervisor and one of its workers over
 * the fork's IPC channel: lifecycle (ready), stats and metrics for the supervisor's views,
 * and the workers' metadata records for the supervisor's registry. Calls are bounded in
 * number and time, and all fail at once when the channel closes (the process died).
 * Embeddings never travel here (the data plane carries them); requests only when one is
 * too large for NATS. A handler's MMError reaches the caller as the same MMError.
 */
export class IpcChannel<T extends TopicMap<T> = IpcTopics> {
  private seq = 0;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  private readonly handlers = new Map<string, Handler>();
  private closed = false;
  private readonly listener = (m: unknown) => this.onMessage(m);

  constructor(
    private readonly peer: IpcPeer,
    private readonly maxPending = 10_000,
  ) {
    peer.on('message', this.listener);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Answers requests (or takes notifications) of `type`; a throw becomes the caller's error. */
  handle<K extends keyof T & string>(
    type: K,
    handler: (payload: T[K]['request']) => T[K]['reply'] | Promise<T[K]['reply']>,
  ): void {
    this.handlers.set(type, handler);
  }

  /** Sends one message, in order with every other; false when the channel is closed. */
  notify<K extends keyof T & string>(type: K, payload: T[K]['request']): boolean {
    let sent = true;
    this.post({ epd: 1, kind: 'note', type, payload }, () => (sent = false));
    return sent;
  }

  request<K extends keyof T & string>(
    type: K,
    payload: T[K]['request'],
    timeoutMs: number,
    onTimeout: () => Error = () => new Error(`IPC ${type} got no answer within ${timeoutMs} ms`),
  ): Promise<T[K]['reply']> {
    if (this.closed) return Promise.reject(new Error(`IPC channel closed (${type})`));
    if (this.pending.size >= this.maxPending) {
      return Promise.reject(new Error(`IPC channel has ${this.pending.size} calls pending`));
    }
    const id = ++this.seq;
    return new Promise<T[K]['reply']>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(onTimeout());
      }, timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve: resolve, reject, timer });
      this.post({ epd: 1, kind: 'req', type, id, payload }, (err) =>
        this.settle(id, undefined, err),
      );
    });
  }

  /** Fails every pending call with `reason` and stops listening. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.peer.off('message', this.listener);
    for (const id of [...this.pending.keys()]) this.settle(id, undefined, new Error(reason));
  }

  private post(envelope: Envelope, onError?: (err: Error) => void): void {
    const fail = (err: Error) => onError?.(err);
    if (this.closed || !this.peer.send) return fail(new Error('IPC channel closed'));
    try {
      this.peer.send(envelope, (err) => err && fail(err));
    } catch (err) {
      fail(err as Error); // ERR_IPC_CHANNEL_CLOSED is thrown synchronously
    }
  }

  private settle(id: number, value: unknown, err?: Error): void {
    const call = this.pending.get(id);
    if (!call) return;
    this.pending.delete(id);
    clearTimeout(call.timer);
    if (err) call.reject(err);
    else call.resolve(value);
  }

  private onMessage(m: unknown): void {
    if (!isEnvelope(m)) return;
    if (m.kind === 'res' && m.id !== undefined) {
      const err =
        m.error === undefined
          ? undefined
          : m.code === undefined
            ? new Error(m.error)
            : Errors.remote(m.error, m.code, m.reqId, m.errorType);
      this.settle(m.id, m.payload, err);
      return;
    }
    const handler = this.handlers.get(m.type);
    if (m.kind === 'note') {
      void Promise.resolve()
        .then(() => handler?.(m.payload))
        .catch(() => undefined);
      return;
    }
    const base = { epd: 1, kind: 'res', type: m.type, id: m.id } as const;
    if (!handler) return this.post({ ...base, error: `no IPC handler for ${m.type}` });
    Promise.resolve()
      .then(() => handler(m.payload))
      .then(
        (payload) => this.post({ ...base, payload }),
        (e: unknown) =>
          this.post(
            e instanceof MMError
              ? { ...base, error: e.message, code: e.code, errorType: e.type, reqId: e.reqId }
              : { ...base, error: (e as Error).message ?? String(e) },
          ),
      );
  }
}
