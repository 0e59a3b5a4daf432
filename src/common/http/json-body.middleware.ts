import type { IncomingMessage } from 'node:http';
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

/** As body-parser decides (type-is): a body is framed by either header. */
function hasBody(req: IncomingMessage): boolean {
  return (
    req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined
  );
}

function refusal(err: unknown): MMError {
  return err instanceof MMError ? err : Errors.fromStatus(String(err), 503);
}

/** What a body is charged to as it arrives (the encoder's WorkBudget). */
export interface BodyBudget {
  /** A lease with no req_id: the body's is not known until it is parsed. */
  lease(): { charge(bytes: number): void; release(): void };
}

export interface JsonBodyOptions {
  /** Largest body (EPD_HTTP_MAX_BODY_BYTES): 413 beyond. */
  limit: number;
  /** A body not received in full within this long is answered 408 (EPD_HTTP_BODY_TIMEOUT_MS). */
  timeoutMs: number;
  /** Charged each chunk as it arrives, given back once the body is received. */
  budget?: BodyBudget;
}

/**
 * The JSON body parser of every HTTP route, with EPD_HTTP_MAX_BODY_BYTES as its limit
 * (Express's undocumented 100 KB default refused any data URI of a real photo). Its
 * errors answer in the service's error shape, naming the limit and the variable, instead
 * of Express's HTML page. HTTP callers act in the shared space (common/tenant.ts): a body
 * whose req_id could name a tenant's is refused (400).
 *
 * Bodies being received are working memory like any other: each chunk is charged to the
 * budget as it arrives (a compressed body, which may inflate to the limit, is charged the
 * limit at once), and all of it is given back once the body is received (or the response
 * ends). A body that no longer fits is answered 503 memory_busy; one not received in full
 * within the timeout, 408. Either way the connection is closed, so the rest of the body
 * is never read. Unbounded before: unfinished 64 MiB bodies, any number, each held up to
 * Node's 300 s request timeout.
 */
export function jsonBody({ limit, timeoutMs, budget }: JsonBodyOptions): RequestHandler {
  const parse = json({ limit });
  return (req, res, next) => {
    // Only what the parser reads is counted: another body is left to its route.
    if (!hasBody(req) || !req.is('application/json')) return parse(req, res, next);
    const lease = budget?.lease();
    let received = 0;
    let answered = false;
    const answer = (error: MMError) => {
      if (answered || res.headersSent) return;
      answered = true;
      clearTimeout(timer);
      req.off('data', onData);
      res.setHeader('Connection', 'close');
      res.once('finish', () => req.destroy());
      res.status(error.code).json(toErrorBody(error));
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      try {
        lease?.charge(chunk.length);
      } catch (err) {
        answer(refusal(err));
      }
    };
    const timer = setTimeout(() => answer(Errors.bodyTimeout(received, timeoutMs)), timeoutMs);
    res.once('close', () => {
      clearTimeout(timer);
      lease?.release();
    });
    if (lease && (req.headers['content-encoding'] ?? 'identity') !== 'identity') {
      try {
        lease.charge(limit);
      } catch (err) {
        return answer(refusal(err));
      }
    }
    parse(req, res, (err?: unknown) => {
      clearTimeout(timer);
      if (answered) return; // refused or timed out: answered already, the socket closes
      req.off('data', onData);
      // Received: from here the request is bounded as any other (EPD_MAX_PENDING, its
      // items' caps, their loads charged as they decode). Held until the response, a body
      // counted against the budget that the request's own parts then wait for: with the
      // budget full, the parts waiting could never be let in (WorkBudget's stuck rule
      // counts only what waiters hold).
      lease?.release();
      const body = req.body as { req_id?: unknown } | undefined;
      const problem = err ? undefined : sharedReqIdProblem(body?.req_id);
      if (!err && !problem) return next();
      answered = true;
      const error = err
        ? toMMError(err as BodyParserError, limit)
        : Errors.badRequest(problem!, body?.req_id as string);
      res.status(error.code).json(toErrorBody(error));
    });
    // After the parser's own listener (attached as it starts reading, in this same turn).
    if (lease) req.on('data', onData);
  };
}
