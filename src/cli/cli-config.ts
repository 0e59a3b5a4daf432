import { EncoderClient } from '../client/encoder-client';
import { AppConfig } from '../config/app-config';
import { loadConfig } from '../config/config.loader';
import { natsConnectionOptions } from '../transport/nats-options';

/**
 * The service's own configuration (config/default.yaml, config/<NODE_ENV>.yaml,
 * EPD_CONFIG, EPD_* variables), so the CLI talks to the service those settings describe:
 * its NATS servers, credentials and subject prefix, its HTTP port and admin token.
 */
export function cliConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  return loadConfig(env).config;
}

/** A client on the configured NATS, with its auth and TLS; fails fast when NATS is down. */
export function connectClient(config: AppConfig): Promise<EncoderClient> {
  const options = natsConnectionOptions(config, 'epd-cli', () => 500);
  return EncoderClient.connect({
    servers: config.nats.url,
    subjectPrefix: config.nats.subjectPrefix,
    connectOptions: { ...options, maxReconnectAttempts: 0, timeout: 5000 },
  });
}

/** The service's HTTP base URL (a wildcard listen address is reached on loopback). */
export function httpBase(config: AppConfig): string {
  const host = ['0.0.0.0', '::', ''].includes(config.http.host) ? '127.0.0.1' : config.http.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.http.port}`;
}

/** GET an admin route as JSON, with the admin token when one is configured. */
export async function adminGet<T>(config: AppConfig, path: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (config.admin.token) headers.Authorization = `Bearer ${config.admin.token}`;
  const url = `${httpBase(config)}${path}`;
  let res: Response;
  try {
    res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new Error(`cannot reach the service at ${url}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const body = (await res.json().catch(() => ({}))) as T & { message?: string };
  if (!res.ok) throw new Error(`${url}: ${res.status} ${body.message ?? res.statusText}`);
  return body;
}
