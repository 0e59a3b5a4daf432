import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Module } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { LoggerModule } from 'nestjs-pino';
import { reqIdOf } from '../common/req-id';
import { AppConfig, dpRole } from '../config/app-config';

function requestReqId(req: IncomingMessage): string | undefined {
  const fromBody = reqIdOf((req as IncomingMessage & { body?: unknown }).body);
  if (fromBody) return fromBody;
  const match = /\/admin\/registry\/([^/?]+)/.exec(req.url ?? '');
  return match?.[1] ? decodeURIComponent(match[1]) : undefined;
}

/** EPD_LOG_FORMAT: pretty lines for a terminal, JSON for everything else. */
export function prettyLogs(config: AppConfig, isTty = process.stdout.isTTY === true): boolean {
  return config.log.format === 'pretty' || (config.log.format === 'auto' && isTty);
}

/** Structured JSON logs (pino); HTTP request logs carry the req_id they concern. */
@Module({
  imports: [
    LoggerModule.forRootAsync({
      inject: [AppConfig],
      useFactory: (config: AppConfig) => ({
        pinoHttp: {
          level: config.log.level,
          ...(prettyLogs(config)
            ? {
                transport: {
                  target: 'pino-pretty',
                  options: {
                    colorize: true,
                    translateTime: 'SYS:HH:MM:ss.l',
                    ignore: 'pid,hostname,context',
                    messageFormat: '{if context}[{context}] {end}{msg}',
                    singleLine: true,
                  },
                },
              }
            : {}),
          // A DP worker's lines name its rank (they share the supervisor's stdout).
          ...(dpRole(config) === 'worker'
            ? { base: { pid: process.pid, hostname: hostname(), dp_rank: config.encoder.dpRank } }
            : {}),
          genReqId: (req) => (req.headers['x-request-id'] as string | undefined) ?? randomUUID(),
          customProps: (req) => {
            const reqId = requestReqId(req);
            return reqId ? { req_id: reqId } : {};
          },
          autoLogging: { ignore: (req) => req.url?.startsWith('/health') ?? false },
          // Secrets never reach a log line, whichever object carries them.
          redact: {
            paths: [
              'req.headers.authorization',
              'req.headers.cookie',
              '*.pass',
              '*.password',
              '*.token',
              '*.creds',
            ],
            censor: '***',
          },
        },
      }),
    }),
  ],
})
export class LoggingModule {}
