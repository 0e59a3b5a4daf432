import { isErrorType, STATUS_TYPES, type ErrorType } from './error-types.doc';

export type { ErrorType } from './error-types.doc';

/**
 * The service's one domain error: a stable message and the HTTP status it maps to.
 * NATS replies carry the same code in `err.code`, so callers of either transport
 * branch on one number.
 */
export class MMError extends Error {
  override readonly name: string = 'MMError';
  /** Stable, machine-readable key (docs/errors.md): clients branch on it, not on text. */
  readonly type: ErrorType;

  /** Made by the catalogue (Errors), the one place that pairs a message with its type. */
  constructor(
    message: string,
    readonly code: number = 500,
    readonly reqId?: string,
    type?: ErrorType,
  ) {
    super(message);
    this.type = type ?? typeForStatus(code);
  }
}

export class BadRequestError extends MMError {
  override readonly name = 'BadRequestError';
  constructor(message: string, reqId?: string, type: ErrorType = 'invalid_request') {
    super(message, 400, reqId, type);
  }
}

export class InternalError extends MMError {
  override readonly name = 'InternalError';
  constructor(message: string, reqId?: string, type: ErrorType = 'internal') {
    super(message, 500, reqId, type);
  }
}

export function typeForStatus(code: number): ErrorType {
  return (
    (STATUS_TYPES as Record<number, ErrorType>)[code] ??
    (code >= 500 ? 'internal' : 'invalid_request')
  );
}

/** A type read off the wire (a peer, a worker, an older encoder): kept when known. */
export function errorTypeOf(value: unknown, code: number): ErrorType {
  return isErrorType(value) ? value : typeForStatus(code);
}
