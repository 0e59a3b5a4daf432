/**
 * The service's one domain error: a stable message and the HTTP status it maps to.
 * NATS replies carry the same code in `err.code`, so callers of either transport
 * branch on one number.
 */
export class MMError extends Error {
  override readonly name: string = 'MMError';
  /** Stable, machine-readable key (docs/errors.md): clients branch on it, not on text. */
  readonly type: string;

  constructor(
    message: string,
    readonly code: number = 500,
    readonly reqId?: string,
    type?: string,
  ) {
    super(message);
    this.type = type ?? typeForStatus(code);
  }
}

export class BadRequestError extends MMError {
  override readonly name = 'BadRequestError';
  constructor(message: string, reqId?: string, type = 'invalid_request') {
    super(message, 400, reqId, type);
  }
}

export class InternalError extends MMError {
  override readonly name = 'InternalError';
  constructor(message: string, reqId?: string, type = 'internal') {
    super(message, 500, reqId, type);
  }
}

/** The type of an error that has no more specific one: by its HTTP status. */
const STATUS_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  499: 'cancelled',
  500: 'internal',
  502: 'bad_gateway',
  503: 'unavailable',
  504: 'timeout',
  507: 'insufficient_storage',
};

export function typeForStatus(code: number): string {
  return STATUS_TYPES[code] ?? (code >= 500 ? 'internal' : 'invalid_request');
}

/** The wire shape of every error, HTTP body and NATS `err` alike. */
export interface ErrorBody {
  status: 'error';
  code: number;
  type: string;
  message: string;
  req_id: string | null;
}

export function toErrorBody(err: MMError, reqId?: string): ErrorBody {
  return {
    status: 'error',
    code: err.code,
    type: err.type,
    message: err.message,
    req_id: err.reqId ?? reqId ?? null,
  };
}

export function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  // `type` is not required here: replies from encoders older than it still parse.
  return v.status === 'error' && typeof v.code === 'number' && typeof v.message === 'string';
}
