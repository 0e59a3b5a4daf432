import { BadRequestError, errorTypeOf, InternalError, MMError } from './mm-error';

/**
 * Every message a caller can see, in one place (docs/contract.md §2, §4, §6). Clients and
 * tests match on these strings, so change them only together with that contract.
 */
/** Names as a message lists them: each quoted, comma-separated. */
export function quotedList(names: Iterable<string>): string {
  return [...names].map((n) => JSON.stringify(n)).join(', ');
}

export const Errors = {
  // metadata registry
  metadataNotReady: (reqId?: string) =>
    new MMError('encode metadata not ready', 504, reqId, 'metadata_not_ready'),
  publishedError: (text: string, reqId?: string) => new MMError(text, 500, reqId, 'encode_failed'),
  destinationNotAllowed: (destination: string, why: string, reqId?: string) =>
    new MMError(
      `destination ${destination} is not allowed by EPD_ALLOWED_DESTINATIONS (${why})`,
      403,
      reqId,
      'destination_not_allowed',
    ),
  overloaded: (retryAfterMs: number, reqId?: string) =>
    new MMError(overloadedMessage(retryAfterMs), 503, reqId, 'overloaded'),
  shuttingDown: (reqId?: string) =>
    new MMError('encoder shutting down', 503, reqId, 'shutting_down'),
  tooManyWaiters: (max: number, reqId?: string) =>
    new MMError(
      `too many pending metadata waits (limit ${max}); retry later`,
      503,
      reqId,
      'too_many_waiters',
    ),
  registryFull: (max: number, reqId?: string) =>
    new MMError(
      `metadata registry is full (limit ${max} entries); retry later`,
      507,
      reqId,
      'registry_full',
    ),
  notReady: (waitingFor: string) =>
    new MMError(
      `instance not ready to serve yet (waiting for: ${waitingFor})`,
      503,
      undefined,
      'not_ready',
    ),
  storeUnavailable: (store: string, reason: string, reqId?: string) =>
    new MMError(`metadata store ${store} unavailable: ${reason}`, 503, reqId, 'store_unavailable'),
  objectStoreUnavailable: (bucket: string, reason: string, reqId?: string) =>
    new MMError(`object store ${bucket} unavailable: ${reason}`, 503, reqId, 'store_unavailable'),
  /** `alive`: why the owner was not called gone before the call (the roster's reason). */
  ownerUnreachable: (owner: string, dp: string, reqId: string, taken = false, alive?: string) =>
    new MMError(
      (taken
        ? `owner instance ${owner} of req_id=${reqId} took the forwarded ${dp}, then stopped answering (NATS recovering from a node loss?)`
        : `owner instance ${owner} of req_id=${reqId} did not acknowledge the forwarded ${dp} (lost in transit; NATS recovering from a node loss?)`) +
        `${alive ? `; not called gone: ${alive}` : ''}; retry`,
      503,
      reqId,
      'owner_unreachable',
    ),
  ownerGone: (owner: string, reqId: string) =>
    new MMError(
      `owner instance ${owner} of req_id=${reqId} is gone; the staged embedding is lost`,
      503,
      reqId,
      'owner_gone',
    ),
  waitCancelled: (reqId?: string) =>
    new MMError('metadata wait cancelled', 499, reqId, 'wait_cancelled'),
  unknownReqId: (reqId: string) =>
    new MMError(`Unknown req_id: ${reqId}`, 404, reqId, 'unknown_req_id'),
  deadlineExceeded: (what: string, reqId?: string) =>
    new MMError(`${what} timed out`, 504, reqId, 'deadline_exceeded'),

  // transport
  payloadTooLarge: (bytes: number, max: number, variable: string) =>
    new MMError(
      `request payload of ${bytes} bytes exceeds the limit of ${max} bytes (${variable})`,
      413,
      undefined,
      'payload_too_large',
    ),
  notJson: (reason: string) =>
    new BadRequestError(`request body is not valid JSON: ${reason}`, undefined, 'invalid_json'),
  /** A request that fails a check whose message says it all (a path, a nesting depth). */
  badRequest: (message: string, reqId?: string) =>
    new BadRequestError(message, reqId, 'invalid_request'),
  invalidField: (what: string, details: string, reqId?: string) =>
    new BadRequestError(`invalid ${what}: ${details}`, reqId, 'invalid_request'),
  unauthorized: () =>
    new MMError('missing or invalid admin bearer token', 401, undefined, 'unauthorized'),
  tooManyStreams: (max: number) =>
    new MMError(
      `too many open dashboard event streams (limit ${max}); close one and retry`,
      503,
      undefined,
      'too_many_streams',
    ),

  // encode validation (docs/contract.md §2): the messages themselves live in encode-request.schema.ts
  invalidEncode: (message: string, reqId?: string) =>
    new BadRequestError(message, reqId, 'invalid_request'),

  // media (docs/contract.md §2; SGLang's preprocessor messages)
  loadFailed: (data: string, reason: string, reqId?: string) =>
    new BadRequestError(
      `Error while loading data ${truncateForMessage(data)}: ${reason}`,
      reqId,
      'load_failed',
    ),
  mediaTooLarge: (data: string, reason: string, reqId?: string) =>
    new MMError(
      `Error while loading data ${truncateForMessage(data)}: ${reason}`,
      413,
      reqId,
      'limit_exceeded',
    ),
  hashMismatch: (expected: string, got: string, reqId?: string) =>
    new BadRequestError(
      `Encoder media content hash mismatch: expected ${expected}, got ${got}`,
      reqId,
      'hash_mismatch',
    ),
  capExceeded: (what: string, value: number, max: number, variable: string, reqId?: string) =>
    new MMError(
      `request has ${value} ${what}, more than the limit of ${max} (${variable})`,
      413,
      reqId,
      'limit_exceeded',
    ),
  planMismatch: (got: number, planned: number, reqId?: string) =>
    new InternalError(
      `preprocessing produced ${got} tokens, but the media headers gave ${planned}`,
      reqId,
      'token_mismatch',
    ),
  loadDeadline: (reqId?: string) =>
    new MMError(
      "media loading did not finish within the request's deadline",
      504,
      reqId,
      'load_timeout',
    ),
  processFailed: (reason: string, reqId?: string) =>
    new BadRequestError(`Failed to process mm items: ${reason}`, reqId, 'process_failed'),

  // encoder and lifecycle (docs/contract.md §4, §6)
  tokenMismatch: (n: number, m: number, reqId?: string) =>
    new InternalError(
      `Encoder produced ${n} tokens, but preprocessor metadata expected ${m}`,
      reqId,
      'token_mismatch',
    ),
  batchTimedOut: (reqId?: string) =>
    new MMError('encoder batch timed out', 504, reqId, 'batch_timeout'),
  noStagedEmbedding: (reqId: string) =>
    new InternalError(
      `no staged embedding for /send req_id=${reqId} (already released)`,
      reqId,
      'already_released',
    ),
  duplicateActive: (reqId: string) =>
    new MMError(`encode already active for req_id=${reqId}`, 409, reqId, 'duplicate_request'),
  releasedBeforeEncode: (reqId: string) =>
    new MMError(`Encoder request was released: ${reqId}`, 409, reqId, 'released'),
  releasedDuringEncode: (reqId: string) =>
    new InternalError(`Encoder request was released: ${reqId}`, reqId, 'released'),
  atCapacity: (pending: number, max: number, reqId?: string) =>
    new MMError(
      `encoder is at capacity: ${pending} requests pending (EPD_MAX_PENDING=${max}); retry later`,
      503,
      reqId,
      'at_capacity',
    ),
  stagingFull: (need: number, free: number, max: number, reqId?: string) =>
    new MMError(
      `staging budget exhausted: need ${need} bytes, ${free} of ${max} free (EPD_STAGING_MAX_BYTES); retry later`,
      507,
      reqId,
      'staging_full',
    ),
  memoryBusy: (need: number, free: number, max: number, reqId?: string) =>
    new MMError(
      `working memory busy: need ${need} bytes, ${Math.max(0, free)} of ${max} free (EPD_WORK_MAX_BYTES); retry later`,
      503,
      reqId,
      'memory_busy',
    ),
  modelShareBusy: (model: string, need: number, held: number, share: number, reqId?: string) =>
    new MMError(
      `working memory busy for model ${JSON.stringify(model)}: need ${need} bytes, its requests hold ${held} of its share of ${share} (EPD_MODEL_WORK_SHARE of EPD_WORK_MAX_BYTES); retry later`,
      503,
      reqId,
      'memory_busy',
    ),
  modelShareTooLarge: (model: string, need: number, share: number, reqId?: string) =>
    new MMError(
      `request needs ${need} bytes of working memory, more than model ${JSON.stringify(model)}'s share of ${share} (EPD_MODEL_WORK_SHARE of EPD_WORK_MAX_BYTES)`,
      507,
      reqId,
      'work_too_large',
    ),
  workTooLarge: (need: number, max: number, reqId?: string) =>
    new MMError(
      `request needs ${need} bytes of working memory, more than the budget of ${max} (EPD_WORK_MAX_BYTES)`,
      507,
      reqId,
      'work_too_large',
    ),
  // DP workers (EPD_DP_SIZE > 1): SGLang's messages where it has them
  workerDied: (rank: number, exitCode: number | null, reqId?: string) =>
    new MMError(`DP worker rank=${rank} died (exitcode=${exitCode})`, 503, reqId, 'worker_died'),
  allWorkersDead: (reqId?: string) =>
    new MMError('All encoder DP workers are dead.', 503, reqId, 'workers_dead'),
  allWorkersAtCapacity: (ranks: number, max: number, reqId?: string) =>
    new MMError(
      `all ${ranks} encoder DP workers are at capacity: ${max} requests pending on each (EPD_MAX_PENDING=${max}); retry later`,
      503,
      reqId,
      'at_capacity',
    ),
  embeddingLost: (reqId: string, detail?: string) =>
    new MMError(
      `staged embedding for req_id=${reqId} was lost (encoder restarted${detail ? `: ${detail}` : ''})`,
      503,
      reqId,
      'embedding_lost',
    ),
  workerNotAnswering: (rank: number, reason: string, reqId?: string) =>
    new MMError(
      `DP worker rank=${rank} is not answering: ${reason}`,
      503,
      reqId,
      'worker_unavailable',
    ),
  encoderNotReady: (reason: string) =>
    new MMError(`encoder not ready: ${reason}`, 503, undefined, 'not_ready'),

  // data plane and destinations (docs/contract.md §5, §6)
  notActive: (reqId: string) =>
    new BadRequestError(`Encoder request is not active: ${reqId}`, reqId, 'not_active'),
  inconsistentReceiveCount: (reqId: string, registered: number, got: number) =>
    new BadRequestError(
      `Inconsistent receive_count for req_id=${reqId}: registered ${registered}, got ${got}`,
      reqId,
      'inconsistent_receive_count',
    ),
  startTimeout: (reqId: string) =>
    new MMError(
      `Timed out waiting for encoder request to start: ${reqId}`,
      504,
      reqId,
      'start_timeout',
    ),
  invalidReceiveUrl: (url: string, reqId?: string) =>
    new BadRequestError(
      `invalid receive_url ${url} (expected host:port or tcp://host:port)`,
      reqId,
      'invalid_request',
    ),
  mooncakeUnsupported: (reqId: string) =>
    new BadRequestError(
      `send of req_id=${reqId} names a Mooncake session (session_id/buffer_address): RDMA transfers are not supported by this encoder; register a ZMQ receive_url or send to a host:port instead`,
      reqId,
      'mooncake_unsupported',
    ),
  noAudioModel: (reqId?: string) =>
    new BadRequestError(
      'this encoder serves no audio model (EPD_AUDIO_MODEL_PATH=none, or a model directory without audio-encoder.onnx)',
      reqId,
      'invalid_request',
    ),
  /** `served`: the served models' names as quotedList gives them, the default first. */
  unknownModel: (model: string, served: string, reqId?: string) =>
    new BadRequestError(
      `unknown model ${JSON.stringify(model.slice(0, 256))}: this encoder serves ${served} (the first is the default)`,
      reqId,
      'invalid_request',
    ),
  audioOnDefaultModel: (model: string, defaultModel: string, reqId?: string) =>
    new BadRequestError(
      `model ${JSON.stringify(model)} serves no audio: audio is encoded by the default model's tower (${JSON.stringify(defaultModel)}); send audio without model, or with that one`,
      reqId,
      'invalid_request',
    ),
  videoNotYet: (model: string, family: string, why: string, reqId?: string) =>
    new BadRequestError(
      `model ${JSON.stringify(model)} (${family}) takes no video here yet: ${why}, so the grid would not be the one the language side computes`,
      reqId,
      'invalid_request',
    ),
  // vLLM's encode-instance face (src/vllm)
  unsafeEcKey: (key: string, why: string) =>
    new BadRequestError(
      `uuid ${JSON.stringify(key.slice(0, 80))} cannot name a directory under EPD_VLLM_EC_PATH: ${why}`,
      undefined,
      'unsafe_ec_key',
    ),
  invalidChat: (message: string) =>
    new BadRequestError(
      `invalid /v1/chat/completions request: ${message}`,
      undefined,
      'invalid_request',
    ),
  vllmFaceOff: () =>
    new MMError(
      "POST /v1/chat/completions is vLLM's encode-instance face; it is off until EPD_VLLM_EC_PATH (and EPD_VLLM_MODEL_ID) is set",
      404,
      undefined,
      'not_found',
    ),
  ecPathFull: (detail: string) =>
    new MMError(`EPD_VLLM_EC_PATH is full: ${detail}`, 507, undefined, 'ec_path_full'),
  ecPathUnwritable: (detail: string) =>
    new MMError(
      `EPD_VLLM_EC_PATH cannot be written: ${detail}`,
      503,
      undefined,
      'ec_path_unwritable',
    ),
  tooManyDestinations: (reqId: string, max: number) =>
    new BadRequestError(
      `req_id=${reqId} already has ${max} destinations (receive_count or the per-request bound)`,
      reqId,
      'too_many_destinations',
    ),
  embeddingWaitTimeout: (reqId: string) =>
    new MMError(
      `timed out waiting for the embedding of req_id=${reqId}`,
      504,
      reqId,
      'embedding_timeout',
    ),
  deliveryFailed: (endpoint: string, reason: string, reqId: string) =>
    new InternalError(
      `send of req_id=${reqId} to ${endpoint} failed: ${reason}`,
      reqId,
      'delivery_failed',
    ),
  destinationsMissing: (reqId: string, registered: number, expected: number) =>
    new MMError(
      `delivery of req_id=${reqId} incomplete: ${registered} of ${expected} destinations registered before the deadline`,
      504,
      reqId,
      'destinations_missing',
    ),
  deliveryIncomplete: (reqId: string, detail: string) =>
    new MMError(
      `delivery of req_id=${reqId} incomplete: ${detail}`,
      502,
      reqId,
      'delivery_incomplete',
    ),
  callerGone: (reqId: string) =>
    new MMError(
      `send of req_id=${reqId} abandoned: the caller disconnected`,
      499,
      reqId,
      'caller_gone',
    ),
  profilingRunning: () =>
    new BadRequestError('profiling already running', undefined, 'profiling_running'),
  profilingNotRunning: () =>
    new BadRequestError('profiling not running', undefined, 'profiling_not_running'),

  // errors of other processes and of frameworks, carried on with their status and type
  /** An error another process answered (a peer, a DP worker, the SDK's encoder): as it was. */
  remote: (message: string, code: number, reqId?: string, type?: unknown) =>
    new MMError(message, code, reqId, errorTypeOf(type, code)),
  /** A framework's error that only has a status (Nest's HttpException, the body parser). */
  fromStatus: (message: string, status: number, reqId?: string) =>
    new MMError(message, status, reqId),
  /** Anything unexpected: the details stay in the log. */
  internal: (reqId?: string) => new InternalError('internal error', reqId),
  noHandler: (pattern: string) =>
    new MMError(`no handler for ${pattern}`, 404, undefined, 'not_found'),
  bodyTimeout: (received: number, ms: number) =>
    new MMError(
      `request body not received in full within ${ms} ms (${received} bytes arrived; EPD_HTTP_BODY_TIMEOUT_MS)`,
      408,
      undefined,
      'body_timeout',
    ),
  bodyTooLarge: (limit: number) =>
    new MMError(
      `request body exceeds the limit of ${limit} bytes (EPD_HTTP_MAX_BODY_BYTES)`,
      413,
      undefined,
      'payload_too_large',
    ),

  // the SDK's own (src/client): what the NATS client said
  noResponders: (subject: string, reqId?: string) =>
    new MMError(
      `no encoder is serving ${subject} (none running, or all overloaded); retry`,
      503,
      reqId,
      'no_responders',
    ),
  overMaxPayload: (dpType: string, reqId?: string) =>
    new MMError(
      `${dpType} request exceeds the NATS server's max_payload`,
      413,
      reqId,
      'payload_too_large',
    ),
  unacknowledged: (subject: string, reqId?: string, taken = false) =>
    new MMError(
      taken
        ? `the encoder that took the call on ${subject} stopped answering (NATS recovering from a node loss?); retry`
        : `no encoder acknowledged the call on ${subject} (lost in transit; NATS recovering from a node loss?); retry`,
      503,
      reqId,
      'unacknowledged',
    ),
  connectionClosed: (reqId?: string) =>
    new MMError('NATS connection is closed', 503, reqId, 'connection_closed'),
  transportFailed: (dpType: string, reason: string, reqId?: string) =>
    new MMError(`${dpType} failed: ${reason}`, 502, reqId, 'bad_gateway'),
  unexpectedReply: (subject: string, reply: string, reqId?: string) =>
    new MMError(`unexpected error reply from ${subject}: ${reply}`, 502, reqId, 'bad_gateway'),
} as const;

/** Media strings can be 20 MB of base64: keep messages and logs short. */
/**
 * The 503 `overloaded` message, also built without an MMError where a call is shed:
 * constructing an Error (its stack trace) was a quarter of the shedding path's CPU.
 */
export function overloadedMessage(retryAfterMs: number): string {
  return `encoder overloaded; retry after ${retryAfterMs} ms`;
}

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
