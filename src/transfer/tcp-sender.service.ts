import { Clock } from '../common/clock';
import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { sleep } from '../common/backoff';
import { connect, type Socket } from 'node:net';
import { EmbeddingTransport, endpointKey, type Endpoint } from './embedding-transport';
import { encodeHeader, type Ack, type FrameHeader } from './frame';

export class TransferError extends Error {}

interface Pending {
  reqId: string;
  /** Its sender stopped waiting; the entry stays so that later acks still line up. */
  abandoned?: boolean;
  resolve(ack: Ack): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/** One reused connection to one receiver. Frames pipeline; acks come back in order. */
class Connection {
  readonly pending: Pending[] = [];
  private lineBuf = '';
  /** Monotonic ms (performance.now): idle time is a span, not a date. */
  lastUsed = performance.now();
  closed = false;

  constructor(
    readonly key: string,
    readonly socket: Socket,
    private readonly onClose: (c: Connection) => void,
  ) {
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('error', (err) =>
      this.fail(new TransferError(`connection to ${key} failed: ${err.message}`)),
    );
    socket.on('close', () =>
      this.fail(new TransferError(`receiver ${key} closed the connection before acking`)),
    );
  }

  send(
    header: FrameHeader,
    payload: Uint8Array,
    timeoutMs: number,
    signal?: AbortSignal,
    written?: () => void,
  ): Promise<Ack> {
    this.lastUsed = performance.now();
    if (this.closed) {
      written?.();
      return Promise.reject(new TransferError(`connection to ${this.key} is closed`));
    }
    return new Promise<Ack>((resolve, reject) => {
      const timer = setTimeout(() => {
        // The stream position is unknown after a timeout: drop the connection, and with it every frame in flight.
        this.fail(new TransferError(`no ack from ${this.key} within ${timeoutMs} ms`));
      }, timeoutMs);
      const entry: Pending = { reqId: header.req_id, resolve, reject, timer };
      signal?.addEventListener('abort', () => this.abandon(entry), { once: true });
      this.pending.push(entry);
      this.socket.cork();
      // Written straight from the staged memory: a view, not a copy. Its callback runs once
      // the socket is done with it: flushed to the kernel, or failed (a destroyed socket
      // calls back every write it still held).
      this.socket.write(encodeHeader(header), payload.byteLength > 0 ? undefined : written);
      if (payload.byteLength > 0)
        this.socket.write(
          Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
          written,
        );
      this.socket.uncork();
    });
  }

  /**
   * The sender went away: answer it now. The connection is closed once nothing in flight
   * on it is still wanted, so a receiver that never acks holds no socket for its deadline.
   */
  private abandon(p: Pending): void {
    if (!this.pending.includes(p)) return;
    p.abandoned = true;
    clearTimeout(p.timer);
    p.reject(new TransferError(`send to ${this.key} abandoned by its caller`));
    if (this.pending.every((q) => q.abandoned))
      this.fail(new TransferError(`every frame in flight to ${this.key} was abandoned`));
  }

  private onData(chunk: string): void {
    this.lineBuf += chunk;
    for (let nl = this.lineBuf.indexOf('\n'); nl >= 0; nl = this.lineBuf.indexOf('\n')) {
      const line = this.lineBuf.slice(0, nl).trim();
      this.lineBuf = this.lineBuf.slice(nl + 1);
      if (!line) continue;
      const p = this.pending.shift();
      if (!p)
        return this.fail(
          new TransferError(`unexpected ack from ${this.key}: ${line.slice(0, 200)}`),
        );
      clearTimeout(p.timer);
      let ack: Ack;
      try {
        ack = JSON.parse(line) as Ack;
      } catch {
        p.reject(new TransferError(`malformed ack from ${this.key}: ${line.slice(0, 200)}`));
        return this.fail(new TransferError(`malformed ack stream from ${this.key}`));
      }
      if (ack.ok === true) p.resolve(ack);
      else
        p.reject(
          new TransferError(
            `receiver ${this.key} refused req_id=${p.reqId}: ${ack.error ?? 'no reason given'}`,
          ),
        );
    }
    if (this.lineBuf.length > 64 * 1024)
      this.fail(new TransferError(`ack line from ${this.key} too long`));
  }

  fail(err: Error): void {
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
      this.onClose(this);
    }
    for (const p of this.pending.splice(0)) {
      clearTimeout(p.timer);
      p.reject(err);
    }
  }
}

const MAX_CONNECTIONS = 256;
const IDLE_MS = 30_000;
/** How long frames in flight at shutdown get for their acks before their connections close. */
const SETTLE_MS = 1_000;

/**
 * The TCP data plane. Connections are reused per endpoint (at most 256, evicted when idle
 * for 30 s, on error, and least-recently-used first when full); frames to one endpoint
 * pipeline on its connection, and a send resolves only with the receiver's ack.
 */
@Injectable()
export class TcpEmbeddingSender extends EmbeddingTransport implements OnApplicationShutdown {
  private readonly logger = new Logger('TcpSender');
  private readonly pool = new Map<string, Connection>();
  private readonly connecting = new Map<string, Promise<Connection>>();
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(private readonly clock: Clock) {
    super();
    this.sweepTimer = setInterval(() => this.evictIdle(), 5_000);
    this.sweepTimer.unref();
  }

  override get reportsWrites(): boolean {
    return true;
  }

  async send(
    endpoint: Endpoint,
    header: FrameHeader,
    payload: Uint8Array,
    deadline: number,
    signal?: AbortSignal,
    written?: () => void,
  ): Promise<Ack> {
    const timeoutMs = Math.max(1, deadline - this.clock.now());
    let conn: Connection;
    try {
      conn = await this.connection(endpoint, timeoutMs);
      signal?.throwIfAborted();
    } catch (err) {
      written?.(); // nothing was written
      throw err;
    }
    return conn.send(header, payload, Math.max(1, deadline - this.clock.now()), signal, written);
  }

  override get openConnections(): number {
    return this.pool.size;
  }

  private connection(endpoint: Endpoint, timeoutMs: number): Promise<Connection> {
    const key = endpointKey(endpoint);
    const existing = this.pool.get(key);
    if (existing && !existing.closed) return Promise.resolve(existing);
    const inflight = this.connecting.get(key);
    if (inflight) return inflight;
    const opening = new Promise<Connection>((resolve, reject) => {
      const socket = connect({ host: endpoint.host, port: endpoint.port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new TransferError(`could not connect to ${key} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        if (this.pool.size >= MAX_CONNECTIONS) this.evictOldest();
        const conn = new Connection(key, socket, (c) => {
          if (this.pool.get(c.key) === c) this.pool.delete(c.key);
        });
        this.pool.set(key, conn);
        resolve(conn);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(new TransferError(`could not connect to ${key}: ${err.message}`));
      });
    }).finally(() => this.connecting.delete(key));
    this.connecting.set(key, opening);
    return opening;
  }

  private evictIdle(): void {
    const now = performance.now();
    for (const conn of this.pool.values()) {
      if (conn.pending.length === 0 && now - conn.lastUsed > IDLE_MS)
        conn.fail(new TransferError('idle'));
    }
  }

  private evictOldest(): void {
    let oldest: Connection | undefined;
    for (const c of this.pool.values())
      if (c.pending.length === 0 && (!oldest || c.lastUsed < oldest.lastUsed)) oldest = c;
    if (oldest) {
      this.logger.debug({ endpoint: oldest.key }, 'evicting least recently used connection');
      oldest.fail(new TransferError('evicted'));
    }
  }

  /**
   * Last in the shutdown (after the handoff of staged embeddings): frames still in flight
   * get up to SETTLE_MS for their acks, then every connection is closed. Closed at the
   * start of the shutdown (onModuleDestroy, as before), a send that a caller was about to
   * be answered for failed `delivery_failed` "shutting down" (the rolling-restart test).
   */
  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.sweepTimer);
    const until = this.clock.now() + SETTLE_MS;
    const busy = () =>
      this.connecting.size > 0 || [...this.pool.values()].some((c) => c.pending.length > 0);
    while (busy() && this.clock.now() < until) await sleep(10);
    for (const c of [...this.pool.values()]) c.fail(new TransferError('shutting down'));
  }
}
