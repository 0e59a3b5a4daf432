import { json, type RequestHandler } from 'express';
import { Errors } from '../errors/error-catalogue';
import { toErrorBody } from '../errors/error-body';
import { MMError } from '../errors/mm-error';
import { sharedReqIdProblem } from '../tenant';

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  length?: number;
}

function toMMError(err: BodyParserError, limit: number): MMError {
  if (err.type === 'entity.too.large') {
    return err.length !== undefined
      ? Errors.payloadTooLarge(err.length, limit, 'EPD_HTTP_MAX_BODY_BYTES')
      : Errors.bodyTooLarge(limit);
  }
  if (err.type === 'entity.parse.failed') return Errors.notJson(err.message);
  const status = err.status ?? 400;
  return Errors.fromStatus(err.message, status >= 400 && status < 500 ? status : 400);
}

/**
 * The JSON body parser of every HTTP route, with EPD_HTTP_MAX_BODY_BYTES as its limit
 * (Express's undocumented 100 KB default refused any data URI of a real photo). Its
 * errors answer in the service's error shape, naming the limit and the variable, instead
 * of Express's HTML page. HTTP callers act in the shared space (common/tenant.ts): a body
 * whose req_id could name a tenant's is refused (400).
 */
export function jsonBody(limit: number): RequestHandler {
  const parse = json({ limit });
  return (req, res, next) => {
    parse(req, res, (err?: unknown) => {
      const body = req.body as { req_id?: unknown } | undefined;
      const problem = err ? undefined : sharedReqIdProblem(body?.req_id);
      if (!err && !problem) return next();
      const error = err
        ? toMMError(err as BodyParserError, limit)
        : Errors.badRequest(problem!, body?.req_id as string);
      res.status(error.code).json(toErrorBody(error));
    });
  };
}
