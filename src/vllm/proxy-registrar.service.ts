import { Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { sleep } from '../common/backoff';
import { AppConfig } from '../config/app-config';

/** The first announcement is retried this often until every proxy took it, as vLLM's own. */
const RETRY_MS = 5000;
const CALL_TIMEOUT_MS = 5000;

export interface ProxyView {
  url: string;
  registered: boolean;
  lastError: string | null;
}

/**
 * Keeps this encoder in the roster of vLLM's disagg proxies (EPD_VLLM_PROXY_URL), as vLLM's
 * own instances do (vllm/distributed/ec_transfer/proxy/register.py): `POST <proxy>/instances`
 * with `{"role": "encode", "url", "ec_zmq_addrs": [], "dp_size": 1}` once HTTP listens,
 * retried every 5 s until every proxy took it, then again every EPD_VLLM_ANNOUNCE_S (a
 * proxy that restarts with an empty roster refills on its own); `DELETE` with the same body
 * when leaving, before HTTP stops. EPD_VLLM_PROXY_API_KEY goes as `X-API-Key`. The proxy
 * then probes our `GET /health` every 5 s.
 */
@Injectable()
export class ProxyRegistrar implements BeforeApplicationShutdown {
  private readonly logger = new Logger('VllmProxyRegistrar');
  private readonly stopping = new AbortController();
  private readonly proxies: ProxyView[];
  private payload?: { role: 'encode'; url: string; ec_zmq_addrs: string[]; dp_size: number };
  private loop?: Promise<void>;

  constructor(private readonly config: AppConfig) {
    this.proxies = (config.vllm.proxyUrls ?? '')
      .split(',')
      .map((u) => u.trim().replace(/\/+$/, ''))
      .filter((u) => u.length > 0)
      .map((url) => ({ url, registered: false, lastError: null }));
  }

  get views(): readonly ProxyView[] {
    return this.proxies;
  }

  get registeredCount(): number {
    return this.proxies.filter((p) => p.registered).length;
  }

  /** Starts announcing (in the background); `httpUrl` is where HTTP listens. */
  start(httpUrl: string): void {
    if (this.proxies.length === 0 || this.loop) return;
    this.payload = { role: 'encode', url: this.advertised(httpUrl), ec_zmq_addrs: [], dp_size: 1 };
    this.loop = this.announceLoop();
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (!this.loop) return;
    this.stopping.abort();
    await this.loop;
    await Promise.all(this.proxies.map((p) => this.call('DELETE', p)));
  }

  private async announceLoop(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted && !(await this.announce())) {
      await sleep(RETRY_MS, signal).catch(() => undefined);
    }
    while (!signal.aborted) {
      await sleep(this.config.vllm.announceS * 1000, signal).catch(() => undefined);
      if (!signal.aborted) await this.announce();
    }
  }

  /** One announcement to every proxy; true when all took it. */
  private async announce(): Promise<boolean> {
    const results = await Promise.all(this.proxies.map((p) => this.call('POST', p)));
    return results.every(Boolean);
  }

  private async call(method: 'POST' | 'DELETE', proxy: ProxyView): Promise<boolean> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.config.vllm.proxyApiKey) headers['x-api-key'] = this.config.vllm.proxyApiKey;
    try {
      const res = await fetch(`${proxy.url}/instances`, {
        method,
        headers,
        body: JSON.stringify(this.payload),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      if (!res.ok) throw new Error(`HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
      const was = proxy.registered;
      proxy.registered = method === 'POST';
      proxy.lastError = null;
      if (was !== proxy.registered)
        this.logger.log(
          { proxy: proxy.url, url: this.payload?.url },
          method === 'POST' ? 'registered with the vLLM proxy' : 'left the vLLM proxy',
        );
      return true;
    } catch (err) {
      const message = (err as Error).message;
      if (proxy.lastError !== message)
        this.logger.warn(
          { proxy: proxy.url, method, err: message },
          method === 'POST'
            ? 'vLLM proxy did not take our announcement; retrying'
            : 'could not leave the vLLM proxy (it evicts us after 3 failed /health probes)',
        );
      proxy.lastError = message;
      if (method === 'POST') proxy.registered = false;
      return false;
    }
  }

  /** EPD_VLLM_ADVERTISE_URL, else EPD_SGLANG_ADVERTISE_URL, else where HTTP listens. */
  private advertised(httpUrl: string): string {
    return (this.config.vllm.advertiseUrl ?? this.config.sglang.advertiseUrl ?? httpUrl).replace(
      /\/+$/,
      '',
    );
  }
}
