import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Module, RequestMethod } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoggerModule, PinoLogger } from 'nestjs-pino';
import type { Options } from 'pino-http';
import { pinoHttp, type HttpLogger } from 'pino-http';
import { reqIdOf } from '../common/req-id';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';

function requestReqId(req: IncomingMessage): string | undefined {
  const fromBody = reqIdOf((req as IncomingMessage & { body?: unknown }).body);
  if (fromBody) return fromBody;
  const match = /\/admin\/registry\/([^/?]+)/.exec(req.url ?? '');
  if (!match?.[1]) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    // Not valid percent-encoding: the route answers 400 for it; the log line needs no id.
    return undefined;
  }
}

/** EPD_LOG_FORMAT: pretty lines for a terminal, JSON for everything else. */
export function prettyLogs(config: AppConfig, isTty = process.stdout.isTTY === true): boolean {
  return config.log.format === 'pretty' || (config.log.format === 'auto' && isTty);
}

/** The one pino logger's options: level, format, the DP rank, and what is redacted. */
function loggerOptions(config: AppConfig, role: ProcessRole): Options {
  return {
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
    ...(role.worker
      ? { base: { pid: process.pid, hostname: hostname(), dp_rank: role.rank } }
      : {}),
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
  };
}

/**
 * HTTP request logging: pino-http on the app's logger, mounted by configureApp. One line
 * per request (health checks aside), with the req_id it concerns.
 *
 * Not nestjs-pino's own middleware: that one also binds a per-request logger through
 * AsyncLocalStorage, and once any request had passed, Node 20's promise hooks ran for
 * every promise of the process, NATS calls included (measured: wait_metadata throughput
 * 0.69-0.71x raw NATS with it, 0.78-0.82x without). Error lines name their req_id and
 * request id themselves (MMExceptionFilter).
 */
export function requestLogging(): (
  req: IncomingMessage,
  res: ServerResponse,
  next: () => void,
) => void {
  let middleware: HttpLogger | undefined;
  return (req, res, next) => {
    middleware ??= pinoHttp({
      logger: PinoLogger.root,
      genReqId: (r) => (r.headers['x-request-id'] as string | undefined) ?? randomUUID(),
      customProps: (r) => {
        const reqId = requestReqId(r);
        return reqId ? { req_id: reqId } : {};
      },
      autoLogging: { ignore: (r) => r.url?.startsWith('/health') ?? false },
    });
    middleware(req, res, next);
  };
}

/** Structured JSON logs (pino) for Nest's Logger; HTTP request lines: requestLogging(). */
@Module({
  imports: [
    LoggerModule.forRootAsync({
      inject: [AppConfig, ProcessRole],
      useFactory: (config: AppConfig, role: ProcessRole) => ({
        pinoHttp: loggerOptions(config, role),
        // nestjs-pino's middleware stays off every route (see requestLogging).
        exclude: [{ path: '{/*splat}', method: RequestMethod.ALL }],
      }),
    }),
  ],
})
export class LoggingModule {}
