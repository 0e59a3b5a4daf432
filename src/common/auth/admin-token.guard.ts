import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable, SetMetadata, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';
import type { Request, Response } from 'express';
import { AppConfig } from '../../config/app-config';
import { Errors } from '../errors/error-catalogue';
import { AdminSessions } from './admin-sessions';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The cookie /admin/login sets (a session id; HttpOnly, SameSite=Strict, Path=/admin). */
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

const SESSION_READABLE = 'epd:session-readable';

/**
 * Marks a read-only GET route of the dashboard (the page, its event stream, the status
 * snapshot) that a browser session may read with its cookie. No other route accepts the
 * cookie: not `GET /start_profile` (SGLang's route changes state on a GET), not the admin
 * API.
 */
export const SessionReadable = () => SetMetadata(SESSION_READABLE, true);

/**
 * When EPD_ADMIN_TOKEN is set, admin routes and subjects need `Authorization: Bearer
 * <token>`: an HTTP header, or a NATS message header of the same name. The dashboard's
 * read-only GETs (@SessionReadable: a browser cannot give its event stream a header) may
 * present instead the session cookie /admin/login sets (AdminSessions: a random id,
 * revoked by logout; never the token). Anything that changes state needs the header, so
 * the cookie cannot be used for cross-site requests. Never in a URL. Both sides of a token
 * comparison are hashed first, so it takes the same time whatever the presented token.
 */
function bearer(header: string | undefined): string | undefined {
  return /^Bearer\s+(.+)$/i.exec(header ?? '')?.[1]?.trim();
}

@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected?: Buffer;

  constructor(
    config: AppConfig,
    private readonly sessions: AdminSessions,
    private readonly reflector: Reflector,
  ) {
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
    const req = context.switchToHttp().getRequest<Request>();
    const readable = this.reflector.get<boolean>(SESSION_READABLE, context.getHandler()) === true;
    if (this.allowsHttp(req, readable)) return true;
    context.switchToHttp().getResponse<Response>().setHeader('WWW-Authenticate', 'Bearer');
    throw Errors.unauthorized();
  }

  /**
   * Whether an HTTP request presents the token (the header), or, for a GET of a route
   * a session may read, a live session's cookie.
   */
  allowsHttp(req: Request, sessionReadable: boolean): boolean {
    if (!this.expected) return true;
    if (this.matches(bearer(req.headers.authorization))) return true;
    return (
      sessionReadable &&
      req.method === 'GET' &&
      this.sessions.valid(cookie(req.headers.cookie, ADMIN_COOKIE))
    );
  }

  /** Whether `token` is the admin token (constant time). */
  matches(token: string | undefined): boolean {
    if (!this.expected) return true;
    const ok = timingSafeEqual(digest(token ?? ''), this.expected);
    return ok && token !== undefined;
  }
}
