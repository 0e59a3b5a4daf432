import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const commaList = z.preprocess(
  (v) =>
    typeof v === 'string'
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : v,
  z.array(z.string().min(1)),
);
const optionalString = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());
const booleanish = z.preprocess(
  (v) => (typeof v === 'string' ? v === 'true' || v === '1' : v),
  z.boolean(),
);

export const configSchema = z
  .object({
    nats: z.object({
      url: commaList.pipe(
        z
          .array(z.string().regex(/^(nats|tls|ws|wss):\/\/[^\s]+$/, 'must be a nats:// URL'))
          .min(1, 'needs at least one server'),
      ),
      user: optionalString,
      pass: optionalString,
      token: optionalString,
      creds: optionalString,
      tlsCa: optionalString,
      subjectPrefix: z
        .string()
        .regex(/^[A-Za-z0-9_-]+$/, 'must be a single subject token (letters, digits, _ and -)'),
      queueGroup: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'must be a valid NATS queue group name'),
      inboxPrefix: z
        .string()
        .regex(
          /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/,
          'must be a subject without wildcards (letters, digits, _ and -, tokens joined by .)',
        ),
      maxRequestBytes: positiveInt,
      reconnectMaxDelayMs: positiveInt,
    }),
    http: z.object({
      host: z.string().min(1),
      port,
      maxBodyBytes: positiveInt,
      bodyTimeoutMs: positiveInt,
      trustProxy: optionalString,
    }),
    timeouts: z.object({ reqTimeoutMs: positiveInt, sendTimeoutMs: positiveInt }),
    registry: z.object({
      store: z.enum(['memory', 'jetstream']),
      maxEntries: positiveInt,
      maxWaiters: positiveInt,
      sweepIntervalMs: positiveInt,
      kvBucket: z
        .string()
        .regex(/^[A-Za-z0-9_-]+$/, 'must be a JetStream KV bucket name (letters, digits, _ and -)'),
      kvReplicas: z.coerce.number().int().min(1).max(5),
      restartLedger: z.string(),
    }),
    instance: z.object({
      // A subject token: the instance answers <prefix>.v1.inst.<id>.<dp_type>.
      id: z.preprocess(
        (v) => (v === '' || v === undefined ? defaultInstanceId() : v),
        z
          .string()
          .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, _ or - (a subject token)'),
      ),
      heartbeatMs: positiveInt,
    }),
    encoder: z.object({
      maxBatchSize: positiveInt,
      maxPending: positiveInt,
      stagingMaxBytes: positiveInt,
      workMaxBytes: positiveInt,
      modelWorkShare: z.coerce.number().gt(0).max(1),
      stagingDtype: z.enum(['float32', 'float16', 'bfloat16']),
      stagingSlabBytes: z.coerce.number().int().min(0),
      // Encoder worker processes; above 1 this process supervises and dispatches to them.
      dpSize: positiveInt.max(64),
      dpRank: z.coerce.number().int().min(0),
      // Set by the supervisor in the environment of the processes it starts (EPD_DP_WORKER).
      dpWorker: booleanish,
      dpRespawnMaxMs: positiveInt,
      modelPath: z.string(),
      modelDir: optionalString,
      audioModelPath: z.string(),
      minPixels: positiveInt,
      maxPixels: positiveInt,
      maxVideoFrames: positiveInt,
      maxItems: positiveInt,
      maxTokensPerRequest: positiveInt,
      maxDecodedPixels: positiveInt,
      maxAudioSeconds: positiveInt,
      maxDecodedAudioBytes: positiveInt,
      preprocessThreads: positiveInt,
      intraOpThreads: positiveInt,
      allowReferenceModel: booleanish,
      ortExecutionProviders: commaList.pipe(
        z
          .array(z.enum(['cpu', 'cuda', 'tensorrt', 'webgpu']))
          .min(1, 'name at least one execution provider (cpu is always available)'),
      ),
      heapGrowingPercent: z.coerce.number().int().min(0).max(1000),
      probeTimeoutMs: positiveInt,
      probeFreshMs: positiveInt,
    }),
    media: z.object({
      allowedDomains: commaList,
      maxBytes: positiveInt,
      root: z.string(),
      fetchTimeoutMs: positiveInt,
      maxRedirects: z.coerce.number().int().min(0).max(20),
      allowPrivateNetworks: booleanish,
    }),
    transfer: z.object({
      backend: z.enum(['tcp', 'zmq']),
      allowedDestinations: commaList,
      zmqSendHwm: positiveInt,
      zmqLingerMs: z.coerce.number().int().min(0),
      // Each PUSH socket holds two file descriptors or more; the service's own ZMQ context is
      // sized from this, so the cap, not libzmq's default of 1023, is what runs out.
      zmqMaxSockets: z.coerce.number().int().min(1).max(8192),
      zmqMaxSocketsPerHost: positiveInt,
      zmqIdleMs: positiveInt,
      zmqEmbeddingClass: z
        .string()
        .regex(/^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$/, 'must be a dotted Python class path'),
      zmqModalityValues: z.enum(['current', 'legacy']),
    }),
    cache: z.object({
      maxBytes: z.coerce.number().int().min(0),
      leaseMs: z.coerce.number().int().min(200).max(600_000),
      maxClaims: positiveInt,
      trustClientHash: booleanish,
      store: z.enum(['memory', 'jetstream']),
      objBucket: z
        .string()
        .regex(
          /^[A-Za-z0-9_-]{1,64}$/,
          'letters, digits, `_` and `-` only (a JetStream bucket name)',
        ),
      objMaxBytes: positiveInt,
      objMaxAgeS: z.coerce.number().int().min(0),
      objReplicas: z.coerce.number().int().min(1).max(5),
      objWriteQueue: z.coerce.number().int().min(1).max(100_000),
    }),
    sglang: z.object({ bootstrapUrl: optionalString, advertiseUrl: optionalString }),
    vllm: z
      .object({
        ecPath: optionalString.refine(
          (p) => p === undefined || p.startsWith('/'),
          'must be an absolute path (the directory vLLM consumers read as shared_storage_path)',
        ),
        ecTtlS: positiveInt.max(7 * 24 * 3600),
        ecMaxBytes: z.coerce
          .number()
          .int()
          .min(1 << 20),
        modelId: optionalString,
        hashAlgorithm: z.enum(['blake3', 'sha256', 'sha512']),
        proxyUrls: optionalString,
        proxyApiKey: optionalString,
        advertiseUrl: optionalString,
        announceS: positiveInt.max(3600),
      })
      .refine(
        (v) => v.proxyUrls === undefined || v.ecPath !== undefined,
        'EPD_VLLM_PROXY_URL needs EPD_VLLM_EC_PATH: without it this encoder cannot serve what the proxy sends',
      )
      .refine(
        (v) => v.ecPath === undefined || v.modelId !== undefined,
        "EPD_VLLM_MODEL_ID must be set with EPD_VLLM_EC_PATH: it is the consumer's --model string, part of every mm_hash computed here",
      ),
    profile: z.object({ root: z.string() }),
    admin: z.object({
      token: optionalString.refine(
        (t) => t === undefined || t.length >= 32,
        'must be at least 32 characters when set (a random one: `openssl rand -hex 32`): the dashboard sign-in can be guessed at, and a short token falls first',
      ),
      metricsRequireToken: booleanish,
    }),
    health: z.object({ natsRttTimeoutMs: positiveInt, maxEventLoopLagMs: positiveInt }),
    shutdown: z.object({ graceMs: positiveInt, drainMs: positiveInt }),
    overload: z.object({
      queueMs: z.coerce.number().int().min(0),
      maxQueued: positiveInt,
      sheddingQueueMs: z.coerce.number().int().min(0),
      stepOut: booleanish,
    }),
    scale: z
      .object({
        windowS: z.coerce.number().int().min(1).max(3600),
        targetUtilization: z.coerce.number().gt(0).max(1),
        targetQueueMs: positiveInt,
        inStableS: z.coerce.number().int().min(0),
        min: z.coerce.number().int().min(0),
        max: positiveInt,
      })
      .refine((s) => s.min <= s.max, 'EPD_SCALE_MIN must not exceed EPD_SCALE_MAX'),
    log: z.object({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
      format: z.enum(['auto', 'json', 'pretty']),
    }),
  })
  .refine((c) => c.vllm.ecPath === undefined || c.encoder.dpSize === 1, {
    path: ['vllm', 'ecPath'],
    message:
      "vLLM's encode face runs in one process: EPD_VLLM_EC_PATH needs EPD_DP_SIZE=1 (run one instance per DP rank instead)",
  });

export type EpdConfigShape = z.infer<typeof configSchema>;

/** Environment variables of docs/configuration.md and the key each one sets. */
export const ENV_KEYS: Readonly<Record<string, readonly [string, string]>> = {
  EPD_NATS_URL: ['nats', 'url'],
  EPD_NATS_USER: ['nats', 'user'],
  EPD_NATS_PASS: ['nats', 'pass'],
  EPD_NATS_TOKEN: ['nats', 'token'],
  EPD_NATS_CREDS: ['nats', 'creds'],
  EPD_NATS_TLS_CA: ['nats', 'tlsCa'],
  EPD_SUBJECT_PREFIX: ['nats', 'subjectPrefix'],
  EPD_NATS_INBOX_PREFIX: ['nats', 'inboxPrefix'],
  EPD_MAX_REQUEST_BYTES: ['nats', 'maxRequestBytes'],
  EPD_HTTP_HOST: ['http', 'host'],
  EPD_SHUTDOWN_GRACE_MS: ['shutdown', 'graceMs'],
  EPD_DRAIN_MS: ['shutdown', 'drainMs'],
  EPD_HTTP_PORT: ['http', 'port'],
  EPD_HTTP_MAX_BODY_BYTES: ['http', 'maxBodyBytes'],
  EPD_HTTP_BODY_TIMEOUT_MS: ['http', 'bodyTimeoutMs'],
  EPD_HTTP_TRUST_PROXY: ['http', 'trustProxy'],
  EPD_REQ_TIMEOUT_MS: ['timeouts', 'reqTimeoutMs'],
  EPD_SEND_TIMEOUT_MS: ['timeouts', 'sendTimeoutMs'],
  EPD_REGISTRY_STORE: ['registry', 'store'],
  EPD_REGISTRY_MAX_ENTRIES: ['registry', 'maxEntries'],
  EPD_REGISTRY_MAX_WAITERS: ['registry', 'maxWaiters'],
  EPD_REGISTRY_SWEEP_INTERVAL_MS: ['registry', 'sweepIntervalMs'],
  EPD_KV_BUCKET: ['registry', 'kvBucket'],
  EPD_KV_REPLICAS: ['registry', 'kvReplicas'],
  EPD_RESTART_LEDGER: ['registry', 'restartLedger'],
  EPD_INSTANCE_ID: ['instance', 'id'],
  EPD_INSTANCE_HEARTBEAT_MS: ['instance', 'heartbeatMs'],
  EPD_MAX_BATCH_SIZE: ['encoder', 'maxBatchSize'],
  EPD_MAX_PENDING: ['encoder', 'maxPending'],
  EPD_STAGING_MAX_BYTES: ['encoder', 'stagingMaxBytes'],
  EPD_WORK_MAX_BYTES: ['encoder', 'workMaxBytes'],
  EPD_MODEL_WORK_SHARE: ['encoder', 'modelWorkShare'],
  EPD_DP_SIZE: ['encoder', 'dpSize'],
  EPD_DP_RANK: ['encoder', 'dpRank'],
  EPD_DP_WORKER: ['encoder', 'dpWorker'],
  EPD_DP_RESPAWN_MAX_MS: ['encoder', 'dpRespawnMaxMs'],
  EPD_MODEL_PATH: ['encoder', 'modelPath'],
  EPD_MODEL_DIR: ['encoder', 'modelDir'],
  EPD_AUDIO_MODEL_PATH: ['encoder', 'audioModelPath'],
  EPD_STAGING_DTYPE: ['encoder', 'stagingDtype'],
  EPD_STAGING_SLAB_BYTES: ['encoder', 'stagingSlabBytes'],
  EPD_MIN_PIXELS: ['encoder', 'minPixels'],
  EPD_MAX_PIXELS: ['encoder', 'maxPixels'],
  EPD_MAX_VIDEO_FRAMES: ['encoder', 'maxVideoFrames'],
  EPD_MAX_ITEMS: ['encoder', 'maxItems'],
  EPD_MAX_TOKENS_PER_REQUEST: ['encoder', 'maxTokensPerRequest'],
  EPD_MAX_DECODED_PIXELS: ['encoder', 'maxDecodedPixels'],
  EPD_MAX_AUDIO_SECONDS: ['encoder', 'maxAudioSeconds'],
  EPD_MAX_DECODED_AUDIO_BYTES: ['encoder', 'maxDecodedAudioBytes'],
  EPD_PREPROCESS_THREADS: ['encoder', 'preprocessThreads'],
  EPD_INTRA_OP_THREADS: ['encoder', 'intraOpThreads'],
  EPD_ALLOW_REFERENCE_MODEL: ['encoder', 'allowReferenceModel'],
  EPD_ORT_EXECUTION_PROVIDERS: ['encoder', 'ortExecutionProviders'],
  EPD_HEAP_GROWING_PERCENT: ['encoder', 'heapGrowingPercent'],
  EPD_ALLOWED_MEDIA_DOMAINS: ['media', 'allowedDomains'],
  EPD_MEDIA_MAX_BYTES: ['media', 'maxBytes'],
  EPD_MEDIA_ROOT: ['media', 'root'],
  EPD_MEDIA_FETCH_TIMEOUT_MS: ['media', 'fetchTimeoutMs'],
  EPD_MEDIA_MAX_REDIRECTS: ['media', 'maxRedirects'],
  EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: ['media', 'allowPrivateNetworks'],
  EPD_TRANSFER_BACKEND: ['transfer', 'backend'],
  EPD_ZMQ_SEND_HWM: ['transfer', 'zmqSendHwm'],
  EPD_ZMQ_LINGER_MS: ['transfer', 'zmqLingerMs'],
  EPD_ZMQ_MAX_SOCKETS: ['transfer', 'zmqMaxSockets'],
  EPD_ZMQ_MAX_SOCKETS_PER_HOST: ['transfer', 'zmqMaxSocketsPerHost'],
  EPD_ZMQ_IDLE_MS: ['transfer', 'zmqIdleMs'],
  EPD_ZMQ_EMBEDDING_CLASS: ['transfer', 'zmqEmbeddingClass'],
  EPD_ZMQ_MODALITY_VALUES: ['transfer', 'zmqModalityValues'],
  EPD_ALLOWED_DESTINATIONS: ['transfer', 'allowedDestinations'],
  EPD_CACHE_MAX_BYTES: ['cache', 'maxBytes'],
  EPD_OVERLOAD_QUEUE_MS: ['overload', 'queueMs'],
  EPD_OVERLOAD_MAX_QUEUED: ['overload', 'maxQueued'],
  EPD_OVERLOAD_SHEDDING_QUEUE_MS: ['overload', 'sheddingQueueMs'],
  EPD_OVERLOAD_STEP_OUT: ['overload', 'stepOut'],
  EPD_SCALE_WINDOW_S: ['scale', 'windowS'],
  EPD_SCALE_TARGET_UTILIZATION: ['scale', 'targetUtilization'],
  EPD_SCALE_TARGET_QUEUE_MS: ['scale', 'targetQueueMs'],
  EPD_SCALE_IN_STABLE_S: ['scale', 'inStableS'],
  EPD_SCALE_MIN: ['scale', 'min'],
  EPD_SCALE_MAX: ['scale', 'max'],
  EPD_CACHE_LEASE_MS: ['cache', 'leaseMs'],
  EPD_CACHE_MAX_CLAIMS: ['cache', 'maxClaims'],
  EPD_CACHE_TRUST_CLIENT_HASH: ['cache', 'trustClientHash'],
  EPD_CACHE_STORE: ['cache', 'store'],
  EPD_OBJ_BUCKET: ['cache', 'objBucket'],
  EPD_OBJ_MAX_BYTES: ['cache', 'objMaxBytes'],
  EPD_OBJ_MAX_AGE_S: ['cache', 'objMaxAgeS'],
  EPD_OBJ_REPLICAS: ['cache', 'objReplicas'],
  EPD_OBJ_WRITE_QUEUE: ['cache', 'objWriteQueue'],
  EPD_SGLANG_BOOTSTRAP_URL: ['sglang', 'bootstrapUrl'],
  EPD_SGLANG_ADVERTISE_URL: ['sglang', 'advertiseUrl'],
  EPD_VLLM_EC_PATH: ['vllm', 'ecPath'],
  EPD_VLLM_EC_TTL_S: ['vllm', 'ecTtlS'],
  EPD_VLLM_EC_MAX_BYTES: ['vllm', 'ecMaxBytes'],
  EPD_VLLM_MODEL_ID: ['vllm', 'modelId'],
  EPD_VLLM_HASH_ALGORITHM: ['vllm', 'hashAlgorithm'],
  EPD_VLLM_PROXY_URL: ['vllm', 'proxyUrls'],
  EPD_VLLM_PROXY_API_KEY: ['vllm', 'proxyApiKey'],
  EPD_VLLM_ADVERTISE_URL: ['vllm', 'advertiseUrl'],
  EPD_VLLM_ANNOUNCE_S: ['vllm', 'announceS'],
  EPD_PROFILE_ROOT: ['profile', 'root'],
  EPD_ADMIN_TOKEN: ['admin', 'token'],
  EPD_METRICS_REQUIRE_TOKEN: ['admin', 'metricsRequireToken'],
  EPD_LOG_LEVEL: ['log', 'level'],
  EPD_LOG_FORMAT: ['log', 'format'],
};

/** Env vars read elsewhere (not config keys), so that they are not reported as unknown. */
export const OTHER_ENV = new Set(['EPD_CONFIG']);

/** host-pid-random, reduced to a subject token: unique per process, readable in logs. */
function defaultInstanceId(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9_-]/g, '-')
      .slice(0, 32) || 'host';
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}
