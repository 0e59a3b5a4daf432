import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { Request, Response } from 'express';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * When EPD_ADMIN_TOKEN is set, admin routes need `Authorization: Bearer <token>`.
 * Both sides are hashed first, so the comparison takes the same time whatever the
 * length or content of the presented token.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected?: Buffer;

  constructor(config: AppConfig) {
    if (config.admin.token) this.expected = digest(config.admin.token);
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.expected) return true;
    const req = context.switchToHttp().getRequest<Request>();
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    const presented = digest(match?.[1]?.trim() ?? '');
    if (timingSafeEqual(presented, this.expected) && match) return true;
    context.switchToHttp().getResponse<Response>().setHeader('WWW-Authenticate', 'Bearer');
    throw Errors.unauthorized();
  }
}
