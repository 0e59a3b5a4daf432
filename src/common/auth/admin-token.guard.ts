import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';
import type { Request, Response } from 'express';
import { AppConfig } from '../../config/app-config';
import { Errors } from '../errors/error-catalogue';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The cookie /admin/login sets (HttpOnly, SameSite=Strict, Path=/admin). */
export const ADMIN_COOKIE = 'epd_admin_token';

/** One cookie's value from a Cookie header. */
export function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * When EPD_ADMIN_TOKEN is set, admin routes and subjects need `Authorization: Bearer
 * <token>`: an HTTP header, or a NATS message header of the same name. A GET (the
 * dashboard and its event stream, which a browser cannot give a header) may present it
 * in the cookie /admin/login sets instead; anything that changes state needs the header,
 * so the cookie cannot be used for cross-site requests. Never in a URL. Both sides are
 * hashed first, so the comparison takes the same time whatever the length or content of
 * the presented token.
 */
function bearer(header: string | undefined): string | undefined {
  return /^Bearer\s+(.+)$/i.exec(header ?? '')?.[1]?.trim();
}

@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected?: Buffer;

  constructor(config: AppConfig) {
    if (config.admin.token) this.expected = digest(config.admin.token);
  }

  get required(): boolean {
    return this.expected !== undefined;
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.expected) return true;
    if (context.getType() === 'rpc') {
      const headers = context.switchToRpc().getContext<NatsContext>().getHeaders() as
        MsgHdrs | undefined;
      if (this.matches(bearer(headers?.get('Authorization')))) return true;
      throw Errors.unauthorized();
    }
    if (this.allowsHttp(context.switchToHttp().getRequest<Request>())) return true;
    context.switchToHttp().getResponse<Response>().setHeader('WWW-Authenticate', 'Bearer');
    throw Errors.unauthorized();
  }

  /** Whether an HTTP request presents the token (header; or, for a GET, the cookie). */
  allowsHttp(req: Request): boolean {
    if (!this.expected) return true;
    if (this.matches(bearer(req.headers.authorization))) return true;
    return req.method === 'GET' && this.matches(cookie(req.headers.cookie, ADMIN_COOKIE));
  }

  /** Whether `token` is the admin token (constant time). */
  matches(token: string | undefined): boolean {
    if (!this.expected) return true;
    const ok = timingSafeEqual(digest(token ?? ''), this.expected);
    return ok && token !== undefined;
  }
}
