import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';
import type { Request, Response } from 'express';
import { AppConfig } from '../../config/app-config';
import { Errors } from '../errors/error-catalogue';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * When EPD_ADMIN_TOKEN is set, admin routes and subjects need `Authorization: Bearer
 * <token>`: an HTTP header, or a NATS message header of the same name. Both sides are
 * hashed first, so the comparison takes the same time whatever the length or content of
 * the presented token.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected?: Buffer;

  constructor(config: AppConfig) {
    if (config.admin.token) this.expected = digest(config.admin.token);
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.expected) return true;
    const rpc = context.getType() === 'rpc';
    const header = rpc
      ? (context.switchToRpc().getContext<NatsContext>().getHeaders() as MsgHdrs | undefined)?.get(
          'Authorization',
        )
      : context.switchToHttp().getRequest<Request>().headers.authorization;
    const match = /^Bearer\s+(.+)$/i.exec(header ?? '');
    const presented = digest(match?.[1]?.trim() ?? '');
    if (timingSafeEqual(presented, this.expected) && match) return true;
    if (!rpc)
      context.switchToHttp().getResponse<Response>().setHeader('WWW-Authenticate', 'Bearer');
    throw Errors.unauthorized();
  }
}
