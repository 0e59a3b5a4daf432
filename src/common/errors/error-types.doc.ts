/**
 * What each error `type` means, for callers: the source of docs/errors.md (`npm run docs`).
 * A test checks that every type the catalogue can produce is described here.
 */
export const ERROR_TYPE_DOCS = [
  {
    types: ['metadata_not_ready'],
    code: '504',
    when: '`wait_metadata` deadline passed: `encode metadata not ready`',
  },
  {
    types: ['encode_failed'],
    code: '500',
    when: 'the metadata of the req_id is a published `{error}`',
  },
  {
    types: ['shutting_down'],
    code: '503',
    when: 'the encoder is stopping; pending waits are answered with this',
  },
  { types: ['too_many_waiters'], code: '503', when: '`EPD_REGISTRY_MAX_WAITERS` pending waits' },
  { types: ['registry_full'], code: '507', when: '`EPD_REGISTRY_MAX_ENTRIES` entries' },
  {
    types: ['store_unavailable'],
    code: '503',
    when: '`EPD_REGISTRY_STORE=jetstream` and NATS (or the KV bucket) is unreachable: `metadata store jetstream unavailable: …`; or a call for an embedding handed over at shutdown, and its object store bucket cannot be read: `object store <bucket> unavailable: …`',
  },
  {
    types: ['not_ready'],
    code: '503',
    when: 'an HTTP call reached an instance still starting (its metadata store, model or roster not ready) and its deadline passed first: `instance not ready to serve yet (waiting for: …)`; retry, or send it to another instance. Also the encoder probe (`health_encode`, `/health_generate`) while the models load',
  },
  {
    types: ['owner_unreachable'],
    code: '503',
    when: "a per-req_id call forwarded to the instance that holds the embedding was not acknowledged by it after 3 attempts of 300 ms (lost in transit): `owner instance {id} of req_id={req_id} did not acknowledge the forwarded {dp_type} …; retry`; or the owner took it and then answered none of 3 probes, 500 ms apart: `… took the forwarded {dp_type}, then stopped answering …`. Each ends with why the owner was not called gone before the call (`not called gone: it heartbeat within the last three beats`, `… this instance's roster cannot tell (its own heartbeats are not being stored on time)`, `… its roster entry could not be read`). The embedding is not known to be lost: retry the call",
  },
  {
    types: ['unacknowledged'],
    code: '503',
    when: 'from the client library (`EncoderClient`, which asks for receipts): no encoder acknowledged the call after 3 sends of 300 ms, or the one that took it answered none of 3 probes, 500 ms apart. Raised by the client, never by the server; retry',
  },
  {
    types: ['owner_gone'],
    code: '503',
    when: 'a per-req_id call for an embedding staged on an instance that is gone: `owner instance {id} of req_id={req_id} is gone; …`',
  },
  {
    types: ['embedding_lost'],
    code: '503',
    when: "the process that staged the embedding is gone for good: a DP worker that died, or this instance's previous process (same `EPD_INSTANCE_ID`, restarted after a crash): `staged embedding for req_id={req_id} was lost (encoder restarted…)`; re-encode",
  },
  { types: ['wait_cancelled'], code: '499', when: 'the waiter went away' },
  {
    types: ['unknown_req_id'],
    code: '404',
    when: 'admin or `send_status` for a req_id with no state',
  },
  {
    types: ['deadline_exceeded'],
    code: '504',
    when: "a call's deadline passed (other than the ones below)",
  },
  {
    types: ['payload_too_large'],
    code: '413',
    when: 'NATS request over `EPD_MAX_REQUEST_BYTES`, HTTP body over `EPD_HTTP_MAX_BODY_BYTES`',
  },
  { types: ['invalid_json'], code: '400', when: 'the body is not JSON' },
  {
    types: ['body_timeout'],
    code: '408',
    when: 'an HTTP request body was not received in full within `EPD_HTTP_BODY_TIMEOUT_MS`; the connection is closed',
  },
  {
    types: ['invalid_request'],
    code: '400',
    when: "a field fails validation (SGLang's messages for `encode`), a path or URL is malformed, JSON nests too deep",
  },
  {
    types: ['unauthorized'],
    code: '401',
    when: '`EPD_ADMIN_TOKEN` is set and the bearer token is missing or wrong',
  },
  {
    types: ['too_many_streams'],
    code: '503',
    when: '16 dashboard event streams (`/admin/events`) are open already',
  },
  {
    types: ['load_failed'],
    code: '400',
    when: 'media could not be loaded or decoded: `Error while loading data …`',
  },
  { types: ['load_timeout'], code: '504', when: "media loading outlived the request's deadline" },
  { types: ['hash_mismatch'], code: '400', when: '`content_hash` does not match' },
  {
    types: ['limit_exceeded'],
    code: '413',
    when: 'a cap on what a request may hold, by bytes or by what they decode to: `EPD_MEDIA_MAX_BYTES` (per item, `Error while loading data …: media is larger than …`), `EPD_MAX_ITEMS`, `EPD_MAX_TOKENS_PER_REQUEST`, `EPD_MAX_DECODED_PIXELS`, `EPD_MAX_AUDIO_SECONDS`, `EPD_MAX_DECODED_AUDIO_BYTES`',
  },
  {
    types: ['process_failed'],
    code: '400',
    when: 'decodable media that cannot be processed (e.g. aspect ratio over 200)',
  },
  {
    types: ['token_mismatch'],
    code: '500',
    when: 'the model (or the decode) produced another token count than the metadata promised',
  },
  {
    types: ['batch_timeout'],
    code: '504',
    when: "the request's deadline passed while queued for the forward",
  },
  {
    types: ['duplicate_request'],
    code: '409',
    when: '`encode` for a req_id that is still active',
  },
  {
    types: ['released'],
    code: '409 / 500',
    when: 'the req_id was released before (409) or during (500) its encode',
  },
  {
    types: ['at_capacity'],
    code: '503',
    when: '`EPD_MAX_PENDING` requests in flight (with DP: on every worker, `all {n} encoder DP workers are at capacity: …`)',
  },
  {
    types: ['overloaded'],
    code: '503',
    when: 'a NATS call arrived while the calls queued ahead of it would take longer than `EPD_OVERLOAD_QUEUE_MS` to reach (or, while the process is already shedding in the queue group, longer than `EPD_OVERLOAD_SHEDDING_QUEUE_MS`): `encoder overloaded; retry after {ms} ms`, answered at once (see operations.md)',
  },
  {
    types: ['destination_not_allowed'],
    code: '403',
    when: "`send`, `register_destinations` or an encode's `prefill_host` names an endpoint `EPD_ALLOWED_DESTINATIONS` does not allow: `destination {host}:{port} is not allowed by EPD_ALLOWED_DESTINATIONS ({why})`",
  },
  {
    types: ['cache_owner_failed', 'cache_peer_busy'],
    code: '503',
    when: "single flight across processes: the process that owned an image's encode could not serve it (three times in a row)",
  },
  {
    types: ['worker_died'],
    code: '503',
    when: 'the DP worker running the call died: `DP worker rank={r} died (exitcode={c})` (a signal is its negated number, SIGKILL `-9`)',
  },
  {
    types: ['workers_dead'],
    code: '503',
    when: 'no DP worker is alive: `All encoder DP workers are dead.`',
  },
  {
    types: ['worker_unavailable'],
    code: '503',
    when: "a DP worker's IPC channel failed without the worker exiting: `DP worker rank={r} is not answering: …`",
  },
  { types: ['staging_full'], code: '507', when: '`EPD_STAGING_MAX_BYTES` would be exceeded' },
  {
    types: ['memory_busy'],
    code: '503',
    when: 'the process-wide working-memory budget (`EPD_WORK_MAX_BYTES`) had no room: for an HTTP request body or a download as it arrived, or for a planned decode and model input before the deadline: `working memory busy: need {n} bytes, …; retry later`',
  },
  {
    types: ['work_too_large'],
    code: '507',
    when: 'one request alone would need more working memory (decoded media and model input, planned from the headers) than `EPD_WORK_MAX_BYTES`',
  },
  {
    types: ['already_released'],
    code: '500',
    when: '`send` for a req_id with no staged embedding: `… (already released)`',
  },
  { types: ['not_active'], code: '400', when: 'registration for a req_id that was released' },
  {
    types: ['inconsistent_receive_count'],
    code: '400',
    when: 'a `receive_count` other than the first one registered',
  },
  {
    types: ['start_timeout'],
    code: '504',
    when: 'a registration waited for an encode that never started',
  },
  {
    types: ['too_many_destinations'],
    code: '400',
    when: 'more destinations than `receive_count` (or 1024)',
  },
  {
    types: ['embedding_timeout'],
    code: '504',
    when: '`send` waited for an embedding that was not staged in time',
  },
  {
    types: ['delivery_failed'],
    code: '500',
    when: 'the receiver refused the frame or the connection failed',
  },
  {
    types: ['destinations_missing'],
    code: '504',
    when: 'fewer than `receive_count` destinations registered by the deadline',
  },
  { types: ['delivery_incomplete'], code: '502', when: 'some destinations failed' },
  {
    types: ['mooncake_unsupported'],
    code: '400',
    when: '`send` with `session_id`/`buffer_address` (a Mooncake RDMA transfer) while `EPD_TRANSFER_BACKEND=zmq`',
  },
  { types: ['caller_gone'], code: '499', when: 'an HTTP `send` whose caller disconnected' },
  {
    types: ['unsafe_ec_key'],
    code: '400',
    when: "vLLM's face: a part's key (its `uuid`) cannot name one directory under `EPD_VLLM_EC_PATH` (empty, `.`/`..`, `/`, `\\`, NUL or another control character, a leading `.`, over 255 bytes); nothing is encoded or written",
  },
  {
    types: ['ec_path_full'],
    code: '507',
    when: "vLLM's face: the EC path's disk (or quota) is full, or one embedding is larger than `EPD_VLLM_EC_MAX_BYTES`; no partial file is left",
  },
  {
    types: ['ec_path_unwritable'],
    code: '503',
    when: "vLLM's face: the EC path cannot be written (permissions, a read-only mount, a vanished directory); no partial file is left",
  },
  {
    types: ['profiling_running', 'profiling_not_running'],
    code: '400',
    when: '`start_profile` while running / `stop_profile` while not',
  },
  {
    types: ['no_responders', 'connection_closed'],
    code: '503',
    when: 'raised by the SDK: no encoder serves the subject (none running) / the NATS connection is closed',
  },
  {
    types: ['bad_gateway'],
    code: '502',
    when: 'raised by the SDK: the NATS request failed otherwise (`{dp_type} failed: …`), or the reply was an error in no shape of ours (`unexpected error reply from {subject}: …`)',
  },
  {
    types: ['not_found'],
    code: '404',
    when: 'a NATS call on a subject whose dp_type has no handler: `no handler for {dp_type}`',
  },
] as const satisfies readonly { types: readonly string[]; code: string; when: string }[];

/** A type the table above describes. */
export type DescribedErrorType = (typeof ERROR_TYPE_DOCS)[number]['types'][number];

/** The type of an error that has no more specific one: by its HTTP status. */
export const STATUS_TYPES = {
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
} as const;

/** Every `type` an error body can carry (docs/errors.md): the compiler holds each MMError to it. */
export type ErrorType = DescribedErrorType | (typeof STATUS_TYPES)[keyof typeof STATUS_TYPES];

/** Every ErrorType, for the error body's schema (and OpenAPI's enum). */
export const ERROR_TYPES: readonly ErrorType[] = [
  ...new Set<ErrorType>([
    ...ERROR_TYPE_DOCS.flatMap((e) => e.types),
    ...Object.values(STATUS_TYPES),
  ]),
];

const KNOWN = new Set<string>(ERROR_TYPES);

export function isErrorType(value: unknown): value is ErrorType {
  return typeof value === 'string' && KNOWN.has(value);
}
