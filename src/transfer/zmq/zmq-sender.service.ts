import { Clock } from '../../common/clock';
import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Context, Push, type Observer } from 'zeromq';
import { AppConfig } from '../../config/app-config';
import { EmbeddingTransport, endpointKey, type Endpoint } from '../embedding-transport';
import type { Ack, FrameHeader } from '../frame';
import { TransferError } from '../tcp-sender.service';
import { embeddingDataFrame } from './embedding-data';

interface PushSocket {
  socket: Push;
  /** Its monitor: handshake events. */
  events: Observer;
  host: string;
  /** zeromq.js allows one send in progress per socket: sends to it run in this chain. */
  tail: Promise<unknown>;
  /** Sends scheduled on this socket and not finished yet. */
  queued: number;
  /** Monotonic ms (performance.now): idle time is a span, not a date. */
  lastUsed: number;
  /** Why it was closed while sends were still queued on it, if it was. */
  closedBecause?: string;
  /** The peer completed the ZMTP handshake (and has not disconnected since). */
  handshaken: boolean;
  /** Why the last handshake failed, if it did (a peer that speaks ZMTP badly). */
  handshakeError?: string;
  /** Woken on every handshake event (success, failure, disconnect). */
  onHandshakeChange: Set<() => void>;
}

/** Closed sockets remembered (weakly) for their monitors' close at shutdown, at most. */
const MAX_RETIRED = 1024;

/** Context slots beyond EPD_ZMQ_MAX_SOCKETS: libzmq's reaper and any socket mid-close. */
const CONTEXT_HEADROOM = 16;
/** Each PUSH socket has a monitor (an inproc PAIR socket: its handshake events) beside it. */
const CONTEXT_SOCKETS_PER_PUSH = 2;

/**
 * SGLang's ZMQ data plane (`zmq_to_scheduler` / `zmq_to_tokenizer`): one PUSH socket per
 * receiver endpoint, kept and reused as SGLang does, and two frames per embedding (the
 * pickled `EmbeddingData`, then the raw bytes in the staging dtype), or one on error.
 *
 * ZMQ has no application ack: a send counts as delivered once ZMQ accepted the message
 * (IMMEDIATE: only onto a connected peer, never queued for one that never came), and only
 * after the peer completed the ZMTP handshake. Without that check a TCP listener that is
 * not ZMQ at all but writes first (an HTTP server's "400 Bad Request") passes libzmq's
 * fallback to ZMTP 1.0, takes the whole frame and the send was reported acked (security
 * review N6; reproduced in test/zmq-handshake.e2e-spec.ts). A receiver that is not there,
 * or not a ZMQ receiver, fails the send at the deadline instead of hiding it in a queue. Sockets are bounded: at most EPD_ZMQ_MAX_SOCKETS (least recently used closed
 * first, at once, failing what was queued on it), at most EPD_ZMQ_MAX_SOCKETS_PER_HOST to
 * one host (a flood of ports on one host replaces only that host's sockets), none kept
 * after a failed send (a destination that took nothing is not reconnected to forever), and
 * none idle past EPD_ZMQ_IDLE_MS. They live in a context of their own whose socket limit
 * is sized from the cap, so the cap is reached and enforced before libzmq's limit (1023 in
 * the shared default context) could refuse a new receiver. Shutdown waits at most
 * EPD_ZMQ_LINGER_MS for what is still queued.
 */
@Injectable()
export class ZmqEmbeddingSender extends EmbeddingTransport implements OnModuleDestroy {
  private readonly logger = new Logger('ZmqSender');
  private readonly sockets = new Map<string, PushSocket>();
  private readonly perHost = new Map<string, number>();
  private readonly context: Context;
  private readonly sweepTimer: NodeJS.Timeout;
  /** Closed sockets whose monitors may still be open (weakly: the collector closes them). */
  private retired: WeakRef<Observer>[] = [];

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {
    super();
    this.context = new Context({
      maxSockets: config.transfer.zmqMaxSockets * CONTEXT_SOCKETS_PER_PUSH + CONTEXT_HEADROOM,
    });
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
    const meta = embeddingDataFrame(
      header,
      this.config.transfer.zmqEmbeddingClass,
      this.clock.now(),
      this.config.transfer.zmqModalityValues,
    );
    const frames = header.error_msg !== undefined ? [meta] : [meta, payload];
    const run = async (): Promise<Ack> => {
      if (signal?.aborted) throw new TransferError(`send to ${key} aborted`);
      if (entry.closedBecause) throw new TransferError(`send to ${key} ${entry.closedBecause}`);
      await this.handshake(entry, key, deadline);
      const remaining = Math.max(1, deadline - this.clock.now());
      entry.socket.sendTimeout = remaining;
      try {
        await entry.socket.send(frames);
      } catch (err) {
        if (entry.closedBecause) throw new TransferError(`send to ${key} ${entry.closedBecause}`);
        throw new TransferError(
          `no ZMQ receiver took the message at ${key} within ${remaining} ms (${(err as Error).message})`,
        );
      } finally {
        entry.lastUsed = performance.now();
      }
      return { req_id: header.req_id, ok: true };
    };
    entry.queued++;
    const result = entry.tail.then(run, run);
    entry.tail = result.then(
      () => void entry.queued--,
      () => {
        // Nothing kept for a destination that did not take the message: the next send to it
        // opens a new socket, instead of this one reconnecting for EPD_ZMQ_IDLE_MS.
        if (--entry.queued === 0 && this.sockets.get(key) === entry) this.close(key);
      },
    );
    return result;
  }

  /**
   * Resolves once the peer at `key` completed the ZMTP handshake; fails when the handshake
   * failed, or when the deadline passes first (nobody there, or not a ZMQ receiver).
   */
  private handshake(entry: PushSocket, key: string, deadline: number): Promise<void> {
    if (entry.handshaken) return Promise.resolve();
    const waitMs = Math.max(1, deadline - this.clock.now());
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (entry.handshaken) done();
        else if (entry.handshakeError)
          done(new TransferError(`ZMTP handshake with ${key} failed: ${entry.handshakeError}`));
        else if (entry.closedBecause)
          done(new TransferError(`send to ${key} ${entry.closedBecause}`));
      };
      const timer = setTimeout(
        () =>
          done(
            new TransferError(
              `no ZMTP handshake with ${key} within ${waitMs} ms: nobody listening there, or not a ZMQ receiver`,
            ),
          ),
        waitMs,
      );
      const done = (err?: Error) => {
        clearTimeout(timer);
        entry.onHandshakeChange.delete(check);
        if (err) reject(err);
        else resolve();
      };
      entry.onHandshakeChange.add(check);
      check();
    });
  }

  onModuleDestroy(): void {
    clearInterval(this.sweepTimer);
    for (const [key, entry] of [...this.sockets]) {
      entry.events.close();
      this.close(key);
    }
    for (const r of this.retired.splice(0)) r.deref()?.close();
  }

  private socketFor(endpoint: Endpoint, key: string): PushSocket {
    const existing = this.sockets.get(key);
    if (existing) {
      // Most recently used last, so the first key is the one to close when full.
      this.sockets.delete(key);
      this.sockets.set(key, existing);
      return existing;
    }
    const { zmqMaxSockets, zmqMaxSocketsPerHost, zmqSendHwm, zmqLingerMs } = this.config.transfer;
    if ((this.perHost.get(endpoint.host) ?? 0) >= zmqMaxSocketsPerHost) {
      // The host's least recently used socket: the first of its in the map's order.
      for (const [oldest, e] of this.sockets) {
        if (e.host !== endpoint.host) continue;
        this.close(
          oldest,
          `abandoned: ${zmqMaxSocketsPerHost} sockets to ${endpoint.host} (EPD_ZMQ_MAX_SOCKETS_PER_HOST) were open and this one was the least recently used`,
        );
        break;
      }
    }
    if (this.sockets.size >= zmqMaxSockets) {
      this.close(
        this.sockets.keys().next().value!,
        `abandoned: ${zmqMaxSockets} sockets (EPD_ZMQ_MAX_SOCKETS) were open and this one was the least recently used`,
      );
    }
    const socket = new Push({
      context: this.context,
      immediate: true,
      sendHighWaterMark: zmqSendHwm,
      linger: zmqLingerMs,
    });
    const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
    if (endpoint.host.includes(':')) socket.ipv6 = true;
    const entry: PushSocket = {
      socket,
      events: socket.events,
      host: endpoint.host,
      tail: Promise.resolve(),
      queued: 0,
      lastUsed: performance.now(),
      handshaken: false,
      onHandshakeChange: new Set(),
    };
    const changed = (handshaken: boolean, error?: string) => {
      entry.handshaken = handshaken;
      entry.handshakeError = error;
      for (const wake of [...entry.onHandshakeChange]) wake();
    };
    // The observer's own receive loop, not its emitter mode (`events.on`): zeromq.js
    // defines that emitter once per process with the `require` of the module instance
    // that loaded first, which a test runner's per-file module registry tears down.
    const events = entry.events;
    // It ends when the observer closes: at shutdown, or collected with its socket.
    void (async () => {
      while (!events.closed) {
        const event = await events.receive().catch(() => undefined);
        if (!event) return; // the observer closed
        if (event.type === 'handshake') changed(true);
        else if (event.type === 'disconnect') changed(false);
        else if (event.type.startsWith('handshake:error'))
          changed(false, 'error' in event ? event.error.message : event.type);
      }
    })();
    socket.connect(`tcp://${host}:${endpoint.port}`);
    this.sockets.set(key, entry);
    this.perHost.set(endpoint.host, (this.perHost.get(endpoint.host) ?? 0) + 1);
    return entry;
  }

  /**
   * Closes a socket, and remembers it weakly until its monitor is closed: an observer left
   * open keeps libzmq's context, and so the process, from exiting (the unit tests hung in
   * half the runs). Monitors are closed at shutdown (onModuleDestroy), or by the collector
   * with their socket; never at once here, since closing one right as a new socket starts
   * made that socket's handshake go unseen (1 run in 8).
   */
  private retire(entry: PushSocket): void {
    entry.socket.close();
    this.retired.push(new WeakRef(entry.events));
    if (this.retired.length > MAX_RETIRED)
      this.retired = this.retired.filter((r) => r.deref()?.closed === false);
    if (this.retired.length > MAX_RETIRED)
      this.retired.splice(0, this.retired.length - MAX_RETIRED);
  }

  private closeIdle(): void {
    const cutoff = performance.now() - this.config.transfer.zmqIdleMs;
    for (const [key, entry] of this.sockets) if (entry.lastUsed < cutoff) this.close(key);
  }

  /**
   * Forgets the socket at once. Without a `reason` it closes once its queued sends have run
   * (linger bounds how long ZMQ then holds them); with one (evicted to make room) it closes
   * now, and what was queued on it fails with that reason.
   */
  private close(key: string, reason?: string): void {
    const entry = this.sockets.get(key);
    if (!entry) return;
    this.sockets.delete(key);
    const left = (this.perHost.get(entry.host) ?? 1) - 1;
    if (left > 0) this.perHost.set(entry.host, left);
    else this.perHost.delete(entry.host);
    const closeSocket = () => {
      try {
        this.retire(entry);
      } catch (err) {
        this.logger.warn({ endpoint: key, err: (err as Error).message }, 'closing PUSH socket');
      }
    };
    if (reason && entry.queued > 0) {
      entry.closedBecause = reason;
      for (const wake of [...entry.onHandshakeChange]) wake();
      this.logger.warn({ endpoint: key, queued: entry.queued }, `PUSH socket ${reason}`);
      closeSocket();
    } else {
      void entry.tail.then(closeSocket);
    }
  }
}
