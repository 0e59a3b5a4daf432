import { readFileSync } from 'node:fs';
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import type { AppConfig } from '../config/app-config';

/** Connection options from config: auth, TLS, and reconnect forever. */
export function natsConnectionOptions(
  config: AppConfig,
  name: string,
  reconnectDelay: () => number,
): ConnectionOptions {
  const { nats } = config;
  const opts: ConnectionOptions = {
    servers: nats.url,
    name,
    // Replies to this process's requests arrive under its own prefix, which the sample
    // roles let no other identity subscribe to (security review N4).
    inboxPrefix: nats.inboxPrefix,
    maxReconnectAttempts: -1,
    reconnectDelayHandler: reconnectDelay,
    // A dead server is noticed at once (its socket closes: back on another node ~100 ms
    // after a kill); a hung one after 2 pings out: left ~8 s after it stopped
    // (bench/results/nats-client.md; nats.js's default, 2 min, was still on it after 20 s).
    pingInterval: 2000,
    maxPingOut: 2,
    timeout: 2000,
    // Without it every request builds an Error up front to enrich a possible timeout's
    // stack: ~70 µs of CPU per forwarded call in the DP dispatch benchmark's profile. Our
    // timeouts are mapped to catalogue errors that name the call anyway.
    noAsyncTraces: true,
  };
  if (nats.user !== undefined) opts.user = nats.user;
  if (nats.pass !== undefined) opts.pass = nats.pass;
  if (nats.token !== undefined) opts.token = nats.token;
  if (nats.creds !== undefined) {
    opts.authenticator = credsAuthenticator(new Uint8Array(readFileSync(nats.creds)));
  }
  if (nats.tlsCa !== undefined) opts.tls = { caFile: nats.tlsCa };
  return opts;
}
