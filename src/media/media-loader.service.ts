import { Clock } from '../common/clock';
import { createHash } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { realpath, stat, open } from 'node:fs/promises';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import { isAbsolute, resolve, sep } from 'node:path';
import { Injectable } from '@nestjs/common';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { AppConfig } from '../config/app-config';
import type { MediaItem } from './media-item';
import { isAllowedHost, isPrivateAddress } from './address-policy';

class LoadError extends Error {}

/** An item over EPD_MEDIA_MAX_BYTES: a limit, answered 413 as too many pixels or tokens are. */
class TooLargeError extends LoadError {}

const privateTarget = (address: string) =>
  new LoadError(
    `${address} is a loopback/private address, which is not allowed (EPD_MEDIA_ALLOW_PRIVATE_NETWORKS)`,
  );

/** The request's own deadline ran out while its media was loading (504, not the item's fault). */
class DeadlineError extends Error {}

/** Told of loaded bytes as they arrive; throws (an MMError) to refuse them. */
export type Charge = (bytes: number) => void;

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/**
 * Turns a media reference into bytes: data URIs, bare base64, files under EPD_MEDIA_ROOT,
 * and http(s) URLs of EPD_ALLOWED_MEDIA_DOMAINS. Every source is capped at
 * EPD_MEDIA_MAX_BYTES (URLs while streaming); URLs are fetched with a timeout, each
 * redirect is re-checked against the allow-list, and the address actually connected to
 * is checked at connect time (no DNS-rebinding gap) against loopback/private ranges.
 */
@Injectable()
export class MediaLoader {
  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /**
   * `deadline` (epoch ms) is the request's: loading never outlives it, so a URL that drips
   * one byte a second cannot hold an admission slot past the caller's timeout.
   * `charge` is told of the bytes as they arrive (before a file or a data URI is copied,
   * per chunk of a download) and may refuse them by throwing an MMError, which ends the
   * load with that error.
   */
  async load(
    item: MediaItem,
    reqId?: string,
    deadline = Infinity,
    charge: Charge = () => {},
  ): Promise<Buffer> {
    let bytes: Buffer;
    try {
      bytes = await this.fetchBytes(item.url, deadline, charge);
    } catch (err) {
      if (err instanceof MMError) throw err;
      if (err instanceof DeadlineError) throw Errors.loadDeadline(reqId);
      if (err instanceof TooLargeError) throw Errors.mediaTooLarge(item.url, err.message, reqId);
      throw Errors.loadFailed(item.url, (err as Error).message, reqId);
    }
    if (item.content_hash) {
      const expected = item.content_hash.replace(/^sha256:/i, '').toLowerCase();
      const got = createHash('sha256').update(bytes).digest('hex');
      if (got !== expected) throw Errors.hashMismatch(expected, got, reqId);
    }
    return bytes;
  }

  private async fetchBytes(ref: string, deadline: number, charge: Charge): Promise<Buffer> {
    if (ref.startsWith('data:')) return this.dataUri(ref, charge);
    if (/^https?:\/\//i.test(ref)) return this.fetchChain(new URL(ref), deadline, charge);
    if (ref.startsWith('file://') || ref.startsWith('/') || ref.startsWith('./'))
      return this.readFile(ref, charge);
    const compact = ref.replace(/\s+/g, '');
    if (compact.length >= 4 && BASE64.test(compact)) return this.base64(compact, charge);
    throw new LoadError(
      'unsupported media reference (expected a data URI, base64, a file path under the media root, or an http(s) URL)',
    );
  }

  private sizeError(n: number): LoadError | undefined {
    const max = this.config.media.maxBytes;
    return n > max
      ? new TooLargeError(`media is larger than ${max} bytes (EPD_MEDIA_MAX_BYTES)`)
      : undefined;
  }

  private checkSize(n: number): void {
    const err = this.sizeError(n);
    if (err) throw err;
  }

  /**
   * Node's base64 decoder skips whitespace and accepts the URL-safe alphabet too, so a
   * multi-MB payload is decoded in one pass, without copies or scans before it (each one
   * cost milliseconds of event loop on a real photo).
   */
  private base64(data: string, charge: Charge): Buffer {
    const size = Math.floor((data.length * 3) / 4) - 2;
    this.checkSize(size);
    charge(Math.max(0, size));
    const out = Buffer.from(data, 'base64');
    if (out.length === 0) throw new LoadError('empty base64 payload');
    this.checkSize(out.length);
    return out;
  }

  private dataUri(uri: string, charge: Charge): Buffer {
    const comma = uri.indexOf(',');
    if (comma < 0) throw new LoadError('malformed data URI (no comma)');
    const meta = uri.slice(5, comma);
    const payload = uri.slice(comma + 1);
    if (meta.endsWith(';base64')) return this.base64(payload, charge);
    const out = Buffer.from(decodeURIComponent(payload), 'utf8');
    this.checkSize(out.length);
    charge(out.length);
    return out;
  }

  private async readFile(ref: string, charge: Charge): Promise<Buffer> {
    const root = this.config.media.root;
    if (!root) throw new LoadError('file paths are disabled (EPD_MEDIA_ROOT is not set)');
    const path = ref.startsWith('file://') ? new URL(ref).pathname : ref;
    const rootReal = await realpath(root);
    const target = await realpath(isAbsolute(path) ? path : resolve(rootReal, path)).catch(() => {
      throw new LoadError('no such file');
    });
    if (target !== rootReal && !target.startsWith(rootReal + sep)) {
      throw new LoadError('path is outside the media root');
    }
    const info = await stat(target);
    if (!info.isFile()) throw new LoadError('not a regular file');
    this.checkSize(info.size);
    charge(info.size);
    const fh = await open(target, 'r');
    try {
      return await fh.readFile();
    } finally {
      await fh.close();
    }
  }

  /**
   * One timeout for the whole redirect chain: the earlier of the fetch timeout and the
   * request's deadline, counted from the first hop (it used to restart on every hop).
   */
  private async fetchChain(first: URL, deadline: number, charge: Charge): Promise<Buffer> {
    const { fetchTimeoutMs, maxRedirects } = this.config.media;
    const budget = Math.min(fetchTimeoutMs, deadline - this.clock.now());
    if (budget <= 0) throw new DeadlineError();
    const byDeadline = deadline - this.clock.now() <= fetchTimeoutMs;
    const signal = AbortSignal.timeout(budget);
    const timedOut = () =>
      byDeadline ? new DeadlineError() : new LoadError(`timed out after ${fetchTimeoutMs} ms`);
    let url = first;
    for (let hop = 0; ; hop++) {
      const result = await this.fetchOnce(url, signal, timedOut, charge);
      if (!(result instanceof URL)) return result;
      if (hop >= maxRedirects) throw new LoadError(`more than ${maxRedirects} redirects`);
      url = result;
    }
  }

  /**
   * Refuses a target before connecting: hosts outside EPD_ALLOWED_MEDIA_DOMAINS, and
   * loopback/private IP literals. Node skips a custom `lookup` for literals, and the URL
   * parser has already turned `2130706433` or `0x7f.1` into `127.0.0.1`, so the literal is
   * checked here; names are checked in `lookup`, and every socket's connected address once
   * more (defence in depth).
   */
  private checkTarget(url: URL): void {
    const { allowedDomains, allowPrivateNetworks } = this.config.media;
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new LoadError(`unsupported scheme ${url.protocol}`);
    if (!isAllowedHost(url.hostname, allowedDomains)) {
      throw new LoadError(
        allowedDomains.length === 0
          ? 'remote URLs are disabled (EPD_ALLOWED_MEDIA_DOMAINS is empty)'
          : `domain ${url.hostname} is not in EPD_ALLOWED_MEDIA_DOMAINS`,
      );
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!allowPrivateNetworks && isIP(host) && isPrivateAddress(host)) throw privateTarget(host);
  }

  /** One hop: the body, or the URL a redirect points to. */
  private fetchOnce(
    url: URL,
    signal: AbortSignal,
    timedOut: () => Error,
    charge: Charge,
  ): Promise<Buffer | URL> {
    this.checkTarget(url);
    const { allowPrivateNetworks } = this.config.media;
    const lookup: LookupFunction = (hostname, options, callback) => {
      dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
        if (err) return callback(err, '', 0);
        const usable = allowPrivateNetworks
          ? addresses
          : addresses.filter((a) => !isPrivateAddress(a.address));
        const first = usable[0];
        if (!first) {
          return callback(
            new LoadError(
              `${hostname} resolves only to loopback/private addresses, which are not allowed`,
            ),
            '',
            0,
          );
        }
        if (options.all)
          return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, usable);
        callback(null, first.address, first.family);
      });
    };
    const get = url.protocol === 'https:' ? httpsGet : httpGet;
    return new Promise<Buffer | URL>((resolvePromise, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        req.destroy();
        reject(err);
      };
      const onAbort = () => fail(timedOut());
      if (signal.aborted) return reject(timedOut());
      signal.addEventListener('abort', onAbort, { once: true });
      const done = (value: Buffer | URL) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        resolvePromise(value);
      };
      const req = get(url, { lookup }, (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400 && res.headers.location) {
          res.resume();
          return done(new URL(res.headers.location, url));
        }
        if (status !== 200) {
          res.resume();
          return fail(new LoadError(`HTTP ${status}`));
        }
        const tooLarge = this.sizeError(Number(res.headers['content-length'] ?? 0));
        if (tooLarge) return fail(tooLarge);
        const chunks: Buffer[] = [];
        let total = 0;
        res.on('data', (chunk: Buffer) => {
          total += chunk.length;
          const overflow = this.sizeError(total);
          if (overflow) return fail(overflow);
          try {
            charge(chunk.length);
          } catch (err) {
            return fail(err as Error);
          }
          chunks.push(chunk);
        });
        res.on('end', () => done(Buffer.concat(chunks, total)));
        res.on('error', (err) => fail(err));
        res.on('close', () => fail(new LoadError('connection closed before the body ended')));
      });
      req.on('socket', (socket: Socket) => {
        socket.once('connect', () => {
          const address = socket.remoteAddress ?? '';
          if (!allowPrivateNetworks && isPrivateAddress(address)) fail(privateTarget(address));
        });
      });
      req.on('error', (err: Error) => fail(err));
    });
  }
}
