import { Errors } from './error-catalogue';
import {
  ArgumentsHost,
  Catch,
  HttpException,
  Injectable,
  Logger,
  type ExceptionFilter,
} from '@nestjs/common';
import type { NatsContext } from '@nestjs/microservices';
import type { Request, Response } from 'express';
import { TimeoutError, throwError, type Observable } from 'rxjs';
import { reqIdOf } from '../req-id';
import { timeoutErrorFor } from './error-catalogue';
import { toErrorBody } from './error-body';
import { MMError } from './mm-error';

/** The last token of a NATS subject, or the last static segment of an HTTP route. */
function operationOf(host: ArgumentsHost): string | undefined {
  if (host.getType() === 'rpc') {
    const subject = host.switchToRpc().getContext<NatsContext>().getSubject?.();
    return subject?.slice(subject.lastIndexOf('.') + 1);
  }
  const req = host.switchToHttp().getRequest<Request>();
  const route = (req.route as { path?: string } | undefined)?.path ?? req.path;
  const segments = route.split('/').filter((s) => s && !s.startsWith(':'));
  return segments.at(-1);
}

function requestData(host: ArgumentsHost): { reqId?: string } {
  if (host.getType() === 'rpc') return { reqId: reqIdOf(host.switchToRpc().getData()) };
  const req = host.switchToHttp().getRequest<Request>();
  return { reqId: reqIdOf(req.body) ?? reqIdOf(req.params) };
}

/**
 * What an error line needs to be found by req_id: its req_id, and the operation (a NATS
 * dp_type) or the HTTP request's id (pino-http's, the one its request line carries).
 * Neither transport binds a per-request logger: that takes AsyncLocalStorage, whose
 * promise hooks every promise of the process then pays (LoggingModule).
 */
function logContext(host: ArgumentsHost, reqId?: string): Record<string, unknown> {
  const context: Record<string, unknown> = reqId ? { req_id: reqId } : {};
  if (host.getType() !== 'rpc') {
    const id = (host.switchToHttp().getRequest<Request>() as Request & { id?: unknown }).id;
    return id === undefined ? context : { ...context, request_id: id };
  }
  const dpType = operationOf(host);
  return dpType ? { ...context, dp_type: dpType } : context;
}

/**
 * The one filter for HTTP and NATS (registered as APP_FILTER so that it covers the
 * hybrid app's microservice too). MMError keeps its code; RxJS TimeoutError becomes the
 * 504 of whatever was being waited for; Nest HttpExceptions keep their status; anything
 * else is a 500 whose details stay in the log, never in the reply.
 */
@Catch()
@Injectable()
export class MMExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): Observable<never> | void {
    const { reqId } = requestData(host);
    const err = this.toMMError(exception, host, reqId);
    const body = toErrorBody(err, reqId);
    if (host.getType() === 'rpc') return throwError(() => body);
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) return;
    // Routes that answer text (start_profile) set their content type up front; errors are JSON.
    res.status(err.code).type('application/json').json(body);
  }

  private toMMError(exception: unknown, host: ArgumentsHost, reqId?: string): MMError {
    if (exception instanceof MMError) {
      if (exception.code >= 500)
        this.logger.warn({ ...logContext(host, reqId), code: exception.code }, exception.message);
      return exception;
    }
    if (exception instanceof TimeoutError) {
      const err = timeoutErrorFor(operationOf(host), reqId);
      this.logger.warn({ ...logContext(host, reqId), code: err.code }, err.message);
      return err;
    }
    if (exception instanceof HttpException) {
      const response = exception.getResponse();
      const message =
        typeof response === 'object' && response !== null && 'message' in response
          ? String(response.message)
          : exception.message;
      return Errors.fromStatus(message, exception.getStatus(), reqId);
    }
    const error = exception instanceof Error ? exception : new Error(String(exception));
    this.logger.error(
      { ...logContext(host, reqId), err: error },
      `unhandled error: ${error.message}`,
    );
    return Errors.internal(reqId);
  }
}
