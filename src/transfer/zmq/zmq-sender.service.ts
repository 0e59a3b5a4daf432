import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Push } from 'zeromq';
import { AppConfig } from '../../config/app-config';
import { EmbeddingTransport, endpointKey, type Endpoint } from '../embedding-transport';
import type { Ack, FrameHeader } from '../frame';
import { TransferError } from '../tcp-sender.service';
import { embeddingDataFrame } from './embedding-data';

interface PushSocket {
  socket: Push;
  /** zeromq.js allows one send in progress per socket: sends to it run in this chain. */
  tail: Promise<unknown>;
  lastUsed: number;
}

/**
 * SGLang's ZMQ data plane (`zmq_to_scheduler` / `zmq_to_tokenizer`): one PUSH socket per
 * receiver endpoint, kept and reused as SGLang does, and two frames per embedding (the
 * pickled `EmbeddingData`, then the raw bytes in the staging dtype), or one on error.
 *
 * ZMQ has no application ack: a send counts as delivered once ZMQ accepted the message
 * (IMMEDIATE: only onto a connected peer, never queued for one that never came). A
 * receiver that is not there fails the send at the deadline instead of hiding it in a
 * queue. Sockets are bounded (EPD_ZMQ_MAX_SOCKETS, least recently used closed first, and
 * closed after EPD_ZMQ_IDLE_MS), and shutdown waits at most EPD_ZMQ_LINGER_MS for what
 * is still queued.
 */
@Injectable()
export class ZmqEmbeddingSender extends EmbeddingTransport implements OnModuleDestroy {
  private readonly logger = new Logger('ZmqSender');
  private readonly sockets = new Map<string, PushSocket>();
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(private readonly config: AppConfig) {
    super();
    this.sweepTimer = setInterval(
      () => this.closeIdle(),
      Math.min(config.transfer.zmqIdleMs, 60_000),
    );
    this.sweepTimer.unref();
  }

  override get openConnections(): number {
    return this.sockets.size;
  }

  send(
    endpoint: Endpoint,
    header: FrameHeader,
    payload: Uint8Array,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<Ack> {
    const key = endpointKey(endpoint);
    const entry = this.socketFor(endpoint, key);
    const meta = embeddingDataFrame(header, this.config.transfer.zmqEmbeddingClass, Date.now());
    const frames = header.error_msg !== undefined ? [meta] : [meta, payload];
    const run = async (): Promise<Ack> => {
      if (signal?.aborted) throw new TransferError(`send to ${key} aborted`);
      const remaining = Math.max(1, deadline - Date.now());
      entry.socket.sendTimeout = remaining;
      try {
        await entry.socket.send(frames);
      } catch (err) {
        throw new TransferError(
          `no ZMQ receiver took the message at ${key} within ${remaining} ms (${(err as Error).message})`,
        );
      } finally {
        entry.lastUsed = Date.now();
      }
      return { req_id: header.req_id, ok: true };
    };
    const result = entry.tail.then(run, run);
    entry.tail = result.catch(() => undefined);
    return result;
  }

  onModuleDestroy(): void {
    clearInterval(this.sweepTimer);
    for (const key of [...this.sockets.keys()]) this.close(key);
  }

  private socketFor(endpoint: Endpoint, key: string): PushSocket {
    const existing = this.sockets.get(key);
    if (existing) {
      // Most recently used last, so the first key is the one to close when full.
      this.sockets.delete(key);
      this.sockets.set(key, existing);
      return existing;
    }
    if (this.sockets.size >= this.config.transfer.zmqMaxSockets) {
      this.close(this.sockets.keys().next().value!);
    }
    const { zmqSendHwm, zmqLingerMs } = this.config.transfer;
    const socket = new Push({
      immediate: true,
      sendHighWaterMark: zmqSendHwm,
      linger: zmqLingerMs,
    });
    const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
    if (endpoint.host.includes(':')) socket.ipv6 = true;
    socket.connect(`tcp://${host}:${endpoint.port}`);
    const entry: PushSocket = { socket, tail: Promise.resolve(), lastUsed: Date.now() };
    this.sockets.set(key, entry);
    return entry;
  }

  private closeIdle(): void {
    const cutoff = Date.now() - this.config.transfer.zmqIdleMs;
    for (const [key, entry] of this.sockets) if (entry.lastUsed < cutoff) this.close(key);
  }

  private close(key: string): void {
    const entry = this.sockets.get(key);
    if (!entry) return;
    this.sockets.delete(key);
    // Closed once its queued sends have run; linger bounds how long ZMQ then holds them.
    void entry.tail.then(() => {
      try {
        entry.socket.close();
      } catch (err) {
        this.logger.warn({ endpoint: key, err: (err as Error).message }, 'closing PUSH socket');
      }
    });
  }
}
