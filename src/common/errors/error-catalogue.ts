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
  payloadTooLarge: (bytes: number, max: number) =>
    new MMError(`request payload of ${bytes} bytes exceeds the limit of ${max} bytes`, 413),
  notJson: (reason: string) => new BadRequestError(`request body is not valid JSON: ${reason}`),
  invalidField: (what: string, details: string, reqId?: string) =>
    new BadRequestError(`invalid ${what}: ${details}`, reqId),
  unauthorized: () => new MMError('missing or invalid admin bearer token', 401),

  // encode validation (DESIGN.md §5)
  notADict: (type: string) => new BadRequestError(`request is not a dict: ${type}`),
  missingReqId: () => new BadRequestError('missing or invalid req_id'),
  missingModality: (reqId?: string) => new BadRequestError('missing or invalid modality', reqId),
  unsupportedModality: (m: string, reqId?: string) =>
    new BadRequestError(`unsupported modality: ${m}`, reqId),
  emptyItems: (reqId?: string) => new BadRequestError('missing or empty mm_items', reqId),
  badNumParts: (reqId?: string) =>
    new BadRequestError('num_parts must be a positive integer', reqId),
  badPartIdx: (numParts: number, reqId?: string) =>
    new BadRequestError(`part_idx must be in [0, ${numParts})`, reqId),
  badHashes: (type: string, reqId?: string) =>
    new BadRequestError(`hashes must be list/scalar, got ${type}`, reqId),

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
} as const;

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
