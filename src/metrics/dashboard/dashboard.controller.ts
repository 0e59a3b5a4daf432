import { readFileSync } from 'node:fs';
import {
  Body,
  Controller,
  Get,
  Header,
  HttpCode,
  Logger,
  Post,
  Req,
  Res,
  Sse,
  UseGuards,
  type MessageEvent,
} from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { map, type Observable } from 'rxjs';
import { z } from 'zod';
import { Throttle, ThrottlerGuard } from '@nestjs/throttler';
import { AdminSessions } from '../../common/auth/admin-sessions';
import {
  ADMIN_COOKIE,
  AdminTokenGuard,
  cookie,
  SessionReadable,
} from '../../common/auth/admin-token.guard';
import { Errors } from '../../common/errors/error-catalogue';
import { ZodPipe } from '../../common/validation/zod.pipe';
import { DASHBOARD_HTML, LOGIN_HTML } from './dashboard-page';
import { DashboardService, type Snapshot } from './dashboard.service';

const loginSchema = z.object({ token: z.string().min(1).max(4096) });

/** uPlot's browser build, read once from the package (no build step, no CDN). */
function asset(path: string): string {
  return readFileSync(require.resolve(path), 'utf8');
}

/** Sign-in attempts per client address and minute (ThrottlerGuard): 429 beyond. */
export const LOGIN_ATTEMPTS_PER_MINUTE = 10;
/**
 * Sign-in attempts per minute from every address together: with EPD_HTTP_TRUST_PROXY the
 * address is the caller's X-Forwarded-For, which a caller that reaches the service past
 * the proxy chooses freely (a new one per attempt bypassed the per-address limit).
 */
export const LOGIN_ATTEMPTS_PER_MINUTE_ALL = 60;

/**
 * The live dashboard: /admin/ui (the page), /admin/events (its Server-Sent Events), and
 * /admin/login, which trades the admin token for a session cookie (HttpOnly,
 * SameSite=Strict; a random id, revoked by /admin/logout, never the token), so that the
 * token never appears in a URL nor in the browser's cookie store. Sign-in attempts are
 * throttled per address, and each failure is logged with it.
 */
@ApiExcludeController()
@Controller('admin')
export class DashboardController {
  private readonly uplotJs = asset('uplot/dist/uPlot.iife.min.js');
  private readonly uplotCss = asset('uplot/dist/uPlot.min.css');
  private readonly logger = new Logger('Dashboard');

  constructor(
    private readonly dashboard: DashboardService,
    private readonly guard: AdminTokenGuard,
    private readonly sessions: AdminSessions,
  ) {}

  /** The page; without the token (when one is set), the sign-in page first. */
  @Get('ui')
  ui(@Req() req: Request, @Res() res: Response): void {
    if (!this.guard.allowsHttp(req, true)) {
      res.redirect(303, '/admin/login');
      return;
    }
    res
      .status(200)
      .type('html')
      .set('Cache-Control', 'no-store')
      .set(
        'Content-Security-Policy',
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'",
      )
      .send(DASHBOARD_HTML);
  }

  @Get('ui/uplot.js')
  @Header('Content-Type', 'text/javascript; charset=utf-8')
  @Header('Cache-Control', 'public, max-age=86400')
  uplotScript(): string {
    return this.uplotJs;
  }

  @Get('ui/uplot.css')
  @Header('Content-Type', 'text/css; charset=utf-8')
  @Header('Cache-Control', 'public, max-age=86400')
  uplotStyle(): string {
    return this.uplotCss;
  }

  @Get('login')
  login(@Res() res: Response): void {
    if (!this.guard.required) {
      res.redirect(303, '/admin/ui');
      return;
    }
    res.status(200).type('html').set('Cache-Control', 'no-store').send(LOGIN_HTML);
  }

  /**
   * `{token}`: 204 with a new session's cookie when it is the admin token, 401 otherwise
   * (logged at warn with the client's address). `Secure` when the request came over TLS:
   * behind a TLS-terminating proxy, set EPD_HTTP_TRUST_PROXY so that it counts.
   */
  @Post('login')
  @HttpCode(204)
  @UseGuards(ThrottlerGuard)
  @Throttle({
    address: { limit: LOGIN_ATTEMPTS_PER_MINUTE, ttl: 60_000 },
    all: { limit: LOGIN_ATTEMPTS_PER_MINUTE_ALL, ttl: 60_000 },
  })
  signIn(
    @Body(new ZodPipe(loginSchema, 'login request')) body: z.infer<typeof loginSchema>,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): void {
    if (!this.guard.required) return;
    if (!this.guard.matches(body.token)) {
      this.logger.warn({ client: req.ip }, 'dashboard sign-in with a wrong admin token');
      throw Errors.unauthorized();
    }
    res.cookie(ADMIN_COOKIE, this.sessions.create(), {
      httpOnly: true,
      sameSite: 'strict',
      secure: req.secure,
      path: '/admin',
      maxAge: AdminSessions.TTL_MS,
    });
  }

  /** Ends the session: its id is revoked, not only the browser's cookie cleared. */
  @Post('logout')
  @HttpCode(204)
  signOut(@Req() req: Request, @Res({ passthrough: true }) res: Response): void {
    this.sessions.revoke(cookie(req.headers.cookie, ADMIN_COOKIE));
    res.clearCookie(ADMIN_COOKIE, { path: '/admin' });
  }

  /** One snapshot of the numbers the dashboard shows (what `epd status` prints). */
  @Get('status')
  @SessionReadable()
  @UseGuards(AdminTokenGuard)
  status(): Promise<Snapshot> {
    return this.dashboard.current();
  }

  /** A `history` event (the last five minutes), then a `snapshot` event a second. */
  @Sse('events')
  @SessionReadable()
  @UseGuards(AdminTokenGuard)
  events(): Observable<MessageEvent> {
    return this.dashboard.stream().pipe(map((e) => ({ type: e.type, data: e.data })));
  }
}
