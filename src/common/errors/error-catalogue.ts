import { BadRequestError, InternalError, MMError } from './mm-error';

/**
 * Every message a caller can see, in one place (DESIGN.md §5, §6, §8). Clients and
 * tests match on these strings, so change them only together with DESIGN.md.
 */
export const Errors = {
  // metadata registry
  metadataNotReady: (reqId?: string) => new MMError('encode metadata not ready', 504, reqId),
  publishedError: (text: string, reqId?: string) => new MMError(text, 500, reqId),
  shuttingDown: (reqId?: string) => new MMError('encoder shutting down', 503, reqId),
  tooManyWaiters: (max: number, reqId?: string) =>
    new MMError(`too many pending metadata waits (limit ${max}); retry later`, 503, reqId),
  registryFull: (max: number, reqId?: string) =>
    new MMError(`metadata registry is full (limit ${max} entries); retry later`, 507, reqId),
  waitCancelled: (reqId?: string) => new MMError('metadata wait cancelled', 499, reqId),
  unknownReqId: (reqId: string) => new MMError(`Unknown req_id: ${reqId}`, 404, reqId),
  deadlineExceeded: (what: string, reqId?: string) => new MMError(`${what} timed out`, 504, reqId),

  // transport
  payloadTooLarge: (bytes: number, max: number, variable: string) =>
    new MMError(
      `request payload of ${bytes} bytes exceeds the limit of ${max} bytes (${variable})`,
      413,
    ),
  notJson: (reason: string) => new BadRequestError(`request body is not valid JSON: ${reason}`),
  invalidField: (what: string, details: string, reqId?: string) =>
    new BadRequestError(`invalid ${what}: ${details}`, reqId),
  unauthorized: () => new MMError('missing or invalid admin bearer token', 401),

  // encode validation (DESIGN.md §5): the messages themselves live in encode-request.schema.ts
  invalidEncode: (message: string, reqId?: string) => new BadRequestError(message, reqId),

  // media (DESIGN.md §5, SGLang's preprocessor messages)
  loadFailed: (data: string, reason: string, reqId?: string) =>
    new BadRequestError(`Error while loading data ${truncateForMessage(data)}: ${reason}`, reqId),
  hashMismatch: (expected: string, got: string, reqId?: string) =>
    new BadRequestError(
      `Encoder media content hash mismatch: expected ${expected}, got ${got}`,
      reqId,
    ),
  capExceeded: (what: string, value: number, max: number, variable: string, reqId?: string) =>
    new MMError(
      `request has ${value} ${what}, more than the limit of ${max} (${variable})`,
      413,
      reqId,
    ),
  planMismatch: (got: number, planned: number, reqId?: string) =>
    new InternalError(
      `preprocessing produced ${got} tokens, but the media headers gave ${planned}`,
      reqId,
    ),
  loadDeadline: (reqId?: string) =>
    new MMError("media loading did not finish within the request's deadline", 504, reqId),
  processFailed: (reason: string, reqId?: string) =>
    new BadRequestError(`Failed to process mm items: ${reason}`, reqId),

  // encoder and lifecycle (DESIGN.md §6, §8)
  tokenMismatch: (n: number, m: number, reqId?: string) =>
    new InternalError(
      `Encoder produced ${n} tokens, but preprocessor metadata expected ${m}`,
      reqId,
    ),
  batchTimedOut: (reqId?: string) => new MMError('encoder batch timed out', 504, reqId),
  noStagedEmbedding: (reqId: string) =>
    new InternalError(`no staged embedding for /send req_id=${reqId} (already released)`, reqId),
  duplicateActive: (reqId: string) =>
    new MMError(`encode already active for req_id=${reqId}`, 409, reqId),
  releasedBeforeEncode: (reqId: string) =>
    new MMError(`Encoder request was released: ${reqId}`, 409, reqId),
  releasedDuringEncode: (reqId: string) =>
    new InternalError(`Encoder request was released: ${reqId}`, reqId),
  atCapacity: (pending: number, max: number, reqId?: string) =>
    new MMError(
      `encoder is at capacity: ${pending} requests pending (EPD_MAX_PENDING=${max}); retry later`,
      503,
      reqId,
    ),
  stagingFull: (need: number, free: number, max: number, reqId?: string) =>
    new MMError(
      `staging budget exhausted: need ${need} bytes, ${free} of ${max} free (EPD_STAGING_MAX_BYTES); retry later`,
      507,
      reqId,
    ),
  encoderNotReady: (reason: string) => new MMError(`encoder not ready: ${reason}`, 503),

  // data plane and destinations (DESIGN.md §7, §8)
  notActive: (reqId: string) =>
    new BadRequestError(`Encoder request is not active: ${reqId}`, reqId),
  inconsistentReceiveCount: (reqId: string, registered: number, got: number) =>
    new BadRequestError(
      `Inconsistent receive_count for req_id=${reqId}: registered ${registered}, got ${got}`,
      reqId,
    ),
  startTimeout: (reqId: string) =>
    new MMError(`Timed out waiting for encoder request to start: ${reqId}`, 504, reqId),
  invalidReceiveUrl: (url: string, reqId?: string) =>
    new BadRequestError(
      `invalid receive_url ${url} (expected host:port or tcp://host:port)`,
      reqId,
    ),
  tooManyDestinations: (reqId: string, max: number) =>
    new BadRequestError(
      `req_id=${reqId} already has ${max} destinations (receive_count or the per-request bound)`,
      reqId,
    ),
  embeddingWaitTimeout: (reqId: string) =>
    new MMError(`timed out waiting for the embedding of req_id=${reqId}`, 504, reqId),
  deliveryFailed: (endpoint: string, reason: string, reqId: string) =>
    new InternalError(`send of req_id=${reqId} to ${endpoint} failed: ${reason}`, reqId),
  destinationsMissing: (reqId: string, registered: number, expected: number) =>
    new MMError(
      `delivery of req_id=${reqId} incomplete: ${registered} of ${expected} destinations registered before the deadline`,
      504,
      reqId,
    ),
  deliveryIncomplete: (reqId: string, detail: string) =>
    new MMError(`delivery of req_id=${reqId} incomplete: ${detail}`, 502, reqId),
  callerGone: (reqId: string) =>
    new MMError(`send of req_id=${reqId} abandoned: the caller disconnected`, 499, reqId),
  profilingRunning: () => new BadRequestError('profiling already running'),
  profilingNotRunning: () => new BadRequestError('profiling not running'),
} as const;

/** Media strings can be 20 MB of base64: keep messages and logs short. */
export function truncateForMessage(data: string, max = 100): string {
  return data.length <= max ? data : `${data.slice(0, max)}… (${data.length} chars)`;
}

/**
 * What a deadline means depends on what was being waited for. Keys are dp_types (NATS)
 * and route names (HTTP); anything else gets the generic message.
 */
const TIMEOUT_MESSAGES: Readonly<Record<string, (reqId?: string) => MMError>> = {
  wait_metadata: Errors.metadataNotReady,
  scheduler_receive_meta_data: Errors.metadataNotReady,
  registry_wait: Errors.metadataNotReady,
  encode: Errors.batchTimedOut,
};

export function timeoutErrorFor(operation: string | undefined, reqId?: string): MMError {
  const make = operation ? TIMEOUT_MESSAGES[operation] : undefined;
  return make ? make(reqId) : Errors.deadlineExceeded(operation ?? 'request', reqId);
}
