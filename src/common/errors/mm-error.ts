/**
 * The service's one domain error: a stable message and the HTTP status it maps to.
 * NATS replies carry the same code in `err.code`, so callers of either transport
 * branch on one number.
 */
export class MMError extends Error {
  override readonly name: string = 'MMError';

  constructor(
    message: string,
    readonly code: number = 500,
    readonly reqId?: string,
  ) {
    super(message);
  }
}

export class BadRequestError extends MMError {
  override readonly name = 'BadRequestError';
  constructor(message: string, reqId?: string) {
    super(message, 400, reqId);
  }
}

export class InternalError extends MMError {
  override readonly name = 'InternalError';
  constructor(message: string, reqId?: string) {
    super(message, 500, reqId);
  }
}

/** The wire shape of every error, HTTP body and NATS `err` alike. */
export interface ErrorBody {
  status: 'error';
  code: number;
  message: string;
  req_id: string | null;
}

export function toErrorBody(err: MMError, reqId?: string): ErrorBody {
  return {
    status: 'error',
    code: err.code,
    message: err.message,
    req_id: err.reqId ?? reqId ?? null,
  };
}

export function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return v.status === 'error' && typeof v.code === 'number' && typeof v.message === 'string';
}
