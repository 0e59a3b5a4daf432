import { redactUrls } from '../common/redact';
import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { BehaviorSubject, firstValueFrom, filter, type Observable } from 'rxjs';
import { withTimeout } from '../common/timeout';
import { backoffMs, sleep } from '../common/backoff';
import { AppConfig } from '../config/app-config';
import { natsConnectionOptions } from './nats-options';
import { StreamedReplies } from './streamed-replies';
import { encodeNatsProtocolWithBuffer } from './utf8';

export type NatsState = 'connecting' | 'connected' | 'reconnecting' | 'closed';

/**
 * The process's one NATS connection, shared by the microservice server, health checks,
 * and every client. If NATS is unreachable at start the process keeps running (HTTP and
 * health answer, readiness says why) and retries with capped exponential backoff forever;
 * once connected, nats.js reconnects forever with the same backoff.
 */
@Injectable()
export class NatsConnectionService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Nats');
  private nc?: NatsConnection;
  private readonly state$ = new BehaviorSubject<NatsState>('connecting');
  private attempt = 0;
  private stopped = false;
  /** Aborts the retry sleep of the connect loop at shutdown. */
  private readonly stopping = new AbortController();
  private lastError = '';

  constructor(private readonly config: AppConfig) {}

  onModuleInit(): void {
    // Every message this process publishes has its protocol line encoded without TextEncoder.
    encodeNatsProtocolWithBuffer();
    void this.connectLoop();
  }

  /** Resolves with the connection once the first connect succeeds. */
  async connection(): Promise<NatsConnection> {
    if (this.nc) return this.nc;
    await firstValueFrom(this.state$.pipe(filter((s) => s !== 'connecting')));
    if (!this.nc) throw new Error('NATS connection closed before it was established');
    return this.nc;
  }

  /** Streamed answers (binary messages to an inbox) over the connection, once it is up. */
  async streamed(): Promise<StreamedReplies> {
    return new StreamedReplies(await this.connection());
  }

  /** The app shut down before NATS was ever reached (connection() then fails). */
  get stoppedBeforeConnect(): boolean {
    return this.stopped && !this.nc;
  }

  /** The connection if established, without waiting. */
  get current(): NatsConnection | undefined {
    return this.nc;
  }

  get state(): NatsState {
    return this.state$.value;
  }

  /** Every state change (the current state first). */
  get states(): Observable<NatsState> {
    return this.state$.asObservable();
  }

  get lastErrorMessage(): string {
    return this.lastError;
  }

  private backoffMs(): number {
    const policy = { baseMs: 100, maxMs: this.config.nats.reconnectMaxDelayMs, jitter: 0.5 };
    return backoffMs(++this.attempt, policy);
  }

  private async connectLoop(): Promise<void> {
    const servers = redactUrls(this.config.nats.url.join(','));
    while (!this.stopped) {
      try {
        const nc = await connect(
          natsConnectionOptions(this.config, 'epd-encoder', () => this.backoffMs()),
        );
        if (this.stopped) {
          await nc.close();
          return;
        }
        this.nc = nc;
        this.attempt = 0;
        this.logger.log({ servers, server: nc.getServer() }, 'connected to NATS');
        this.state$.next('connected');
        void this.watchStatus(nc);
        return;
      } catch (err) {
        const delay = this.backoffMs();
        this.lastError = redactUrls((err as Error).message);
        this.logger.warn(
          { servers, err: this.lastError, retryInMs: delay },
          `NATS not reachable at ${servers}: ${this.lastError}; retrying`,
        );
        await sleep(delay, this.stopping.signal).catch(() => undefined);
      }
    }
  }

  private async watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      switch (s.type) {
        case 'disconnect':
          this.lastError = 'disconnected';
          this.logger.warn({ server: s.server }, 'NATS disconnected; reconnecting');
          this.state$.next('reconnecting');
          break;
        case 'reconnect':
          this.attempt = 0;
          this.logger.log({ server: s.server }, 'NATS reconnected');
          this.state$.next('connected');
          break;
        case 'error':
          this.lastError = redactUrls(String(s.error));
          this.logger.error({ err: String(s.error) }, 'NATS error');
          break;
        case 'slowConsumer':
          this.logger.warn({ sub: s.sub.getSubject() }, 'NATS slow consumer: messages dropped');
          break;
        default:
          break;
      }
    }
    if (!this.stopped) this.logger.error('NATS connection closed unexpectedly');
    this.state$.next('closed');
  }

  /**
   * Drains (stops subscriptions after their in-flight handlers, flushes replies) within
   * the shutdown grace, then closes. Runs after the registry has failed pending waits,
   * so their 503 replies are flushed by the drain.
   */
  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    const nc = this.nc;
    if (!nc || nc.isClosed()) {
      this.state$.next('closed');
      return;
    }
    const grace = this.config.shutdown.graceMs;
    try {
      await withTimeout(nc.drain(), grace, () => new Error(`drain took longer than ${grace} ms`));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'NATS drain incomplete; closing');
      await nc.close().catch(() => undefined);
    }
    this.state$.next('closed');
  }
}
