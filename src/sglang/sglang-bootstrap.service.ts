import { Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { hostname } from 'node:os';
import { backoffMs, sleep } from '../common/backoff';
import { AppConfig } from '../config/app-config';

const RETRY = { baseMs: 500, maxMs: 10_000, jitter: 0.2 };
const CALL_TIMEOUT_MS = 5000;

/**
 * Self-registration with SGLang's encoder bootstrap server (EPD_SGLANG_BOOTSTRAP_URL), as
 * SGLang's own encoder does: `POST /register_encoder_url {url}` once HTTP listens
 * (retried with backoff until the bootstrap server answers), and
 * `DELETE /unregister_encoder_url {url}` at shutdown, so the prefill side stops routing
 * here before we stop answering. The bootstrap server then probes our `/health`.
 */
@Injectable()
export class SglangBootstrap implements BeforeApplicationShutdown {
  private readonly logger = new Logger('SglangBootstrap');
  private readonly stopping = new AbortController();
  private registeredUrl?: string;
  private loop?: Promise<void>;

  constructor(private readonly config: AppConfig) {}

  get registered(): string | undefined {
    return this.registeredUrl;
  }

  /** Starts registering (in the background); `httpUrl` is where HTTP listens. */
  start(httpUrl: string): void {
    const base = this.config.sglang.bootstrapUrl;
    if (!base || this.loop) return;
    const url = this.advertised(httpUrl);
    this.loop = this.registerLoop(base, url);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    const base = this.config.sglang.bootstrapUrl;
    const url = this.registeredUrl;
    if (!base || !url) return;
    try {
      await this.call('DELETE', base, '/unregister_encoder_url', url);
      this.registeredUrl = undefined;
      this.logger.log({ bootstrap: base, url }, 'unregistered from the SGLang encoder bootstrap');
    } catch (err) {
      this.logger.warn(
        { bootstrap: base, url, err: (err as Error).message },
        'could not unregister from the SGLang encoder bootstrap (it evicts us when /health fails)',
      );
    }
  }

  private async registerLoop(base: string, url: string): Promise<void> {
    for (let attempt = 1; !this.stopping.signal.aborted; attempt++) {
      try {
        await this.call('POST', base, '/register_encoder_url', url);
        this.registeredUrl = url;
        this.logger.log({ bootstrap: base, url }, 'registered with the SGLang encoder bootstrap');
        return;
      } catch (err) {
        const waitMs = backoffMs(attempt, RETRY);
        this.logger.warn(
          { bootstrap: base, url, err: (err as Error).message, retryInMs: waitMs },
          'SGLang encoder bootstrap not reachable; retrying',
        );
        await sleep(waitMs, this.stopping.signal).catch(() => undefined);
      }
    }
  }

  private async call(method: 'POST' | 'DELETE', base: string, path: string, url: string) {
    const signal = AbortSignal.timeout(CALL_TIMEOUT_MS);
    const res = await fetch(new URL(path, base), {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url }),
      signal,
    });
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  }

  /** EPD_SGLANG_ADVERTISE_URL, else our HTTP URL (the host name when bound to every address). */
  private advertised(httpUrl: string): string {
    if (this.config.sglang.advertiseUrl) return this.config.sglang.advertiseUrl;
    const u = new URL(httpUrl);
    if (u.hostname === '0.0.0.0' || u.hostname === '[::]') u.hostname = hostname();
    return u.origin;
  }
}
