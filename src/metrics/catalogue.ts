/**
 * Every Prometheus family the service exports: its type, labels, help, and the SGLang
 * family it replaces (SGLang's encoder server ships `sglang:encoder_*`). The metric
 * providers take their name, help and labels from here (`family()`), docs/metrics.md is
 * generated from it, and an e2e test checks that a running app exports exactly these.
 *
 * Labels are bounded sets: modality, stage, status, error `type` (the catalogue in
 * error-catalogue.ts), outcome, reason, dp_rank (< EPD_DP_SIZE). Never a req_id or a URL.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricSpec {
  readonly type: MetricType;
  readonly help: string;
  readonly labels: readonly string[];
  /** The SGLang family this one replaces, or how it relates to SGLang's. */
  readonly sglang?: string;
  /** Which deployments export it (default: every process). */
  readonly only?: string;
}

/** Seconds: 0.5 ms to 30 s, for stages from a registry wait to a video forward. */
export const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
/** Items and requests per batch or request (EPD_MAX_ITEMS is 32 by default). */
export const COUNT_BUCKETS = [1, 2, 4, 8, 16, 32, 64];
/** Tokens per request: one small image (4) to Qwen2-VL's largest (16384). */
export const TOKEN_BUCKETS = [16, 64, 256, 1024, 4096, 16384];

const modality = ['modality'] as const;

const spec = <const T extends Record<string, MetricSpec>>(m: T) => m;

export const METRICS = spec({
  // --- Encode requests ----------------------------------------------------------------
  epd_encoder_model_info: {
    type: 'gauge',
    help: 'The models served: 1 per model, by its name (file name), family (whose contract it has) and reference (true: a generated stand-in with random weights, EPD_ALLOW_REFERENCE_MODEL)',
    labels: ['name', 'family', 'reference'],
    sglang: 'none',
  },
  epd_encoder_model_requests_total: {
    type: 'counter',
    help: "Encode outcomes by the model that served them (a request's `model`, or the default; audio: the audio tower's name): status success, error or rejected",
    labels: ['model', 'modality', 'status'],
    sglang: 'none',
  },
  epd_encoder_requests_received_total: {
    type: 'counter',
    help: 'Encode requests admitted (past EPD_MAX_PENDING)',
    labels: modality,
    sglang: 'sglang:encoder_requests_received_total',
  },
  epd_encoder_requests_total: {
    type: 'counter',
    help: 'Encode outcomes: status success, error (type = the error type of the reply) or rejected (at admission: at_capacity, or a 409 at begin)',
    labels: ['modality', 'status', 'type'],
    sglang:
      'sglang:encoder_requests_total (status success/error; ours adds rejected and the error type)',
  },
  epd_encoder_rejections_total: {
    type: 'counter',
    help: 'Encode requests refused for capacity or state: 409 (duplicate or released req_id), 503 (at_capacity), 507 (staging_full), by HTTP code and error type',
    labels: ['code', 'type'],
    sglang: 'none (SGLang counts these as errors, or drops them)',
  },
  epd_encoder_model_inputs_held: {
    type: 'gauge',
    help: 'Preprocessed model inputs waiting in the main thread for their forward, each a buffer parked in a MessagePort (bounded by EPD_MAX_PENDING; 0 when idle)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_staging_slab_bytes: {
    type: 'gauge',
    help: 'Bytes of the staging slab (EPD_STAGING_SLAB_BYTES) in slots: staged embeddings, and sends still writing from released ones (0 when idle)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_pending_requests: {
    type: 'gauge',
    help: 'Encode requests admitted and not yet answered (bounded by EPD_MAX_PENDING)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_active_requests: {
    type: 'gauge',
    help: 'Requests with state in this process (encoding or staged)',
    labels: [],
    sglang: 'none',
  },
  // --- Stage latencies -------------------------------------------------------------------
  epd_encoder_load_seconds: {
    type: 'histogram',
    help: 'Media load: fetch or read, and decode-free validation of every item',
    labels: modality,
    sglang: 'part of sglang:encoder_preprocess_seconds (SGLang times load and processor together)',
  },
  epd_encoder_plan_seconds: {
    type: 'histogram',
    help: 'Reading the media headers (caps and staging reservation), including the wait for a worker thread',
    labels: modality,
    sglang: 'part of sglang:encoder_preprocess_seconds',
  },
  epd_encoder_preprocess_wait_seconds: {
    type: 'histogram',
    help: 'Waiting for a free preprocessing thread (EPD_PREPROCESS_THREADS)',
    labels: modality,
    sglang: 'none',
  },
  epd_encoder_preprocess_seconds: {
    type: 'histogram',
    help: 'Decode, resize and normalize into the patch grid',
    labels: modality,
    sglang: 'sglang:encoder_preprocess_seconds (without the load)',
  },
  epd_encoder_queue_wait_seconds: {
    type: 'histogram',
    help: 'Waiting for the batched forward, from preprocessed to the forward starting',
    labels: modality,
    sglang: 'sglang:encoder_queue_wait_seconds',
  },
  epd_encoder_forward_seconds: {
    type: 'histogram',
    help: 'The model forward that carried the request',
    labels: modality,
    sglang: 'sglang:encoder_model_forward_seconds',
  },
  epd_encoder_stage_seconds: {
    type: 'histogram',
    help: 'Staging the embedding and publishing its final metadata',
    labels: modality,
    sglang: 'none',
  },
  epd_encoder_request_e2e_latency_seconds: {
    type: 'histogram',
    help: 'Encode request end to end, from arrival to the reply (including pushes named in the request)',
    labels: modality,
    sglang: 'sglang:encoder_request_e2e_latency_seconds',
  },
  // --- Sizes -----------------------------------------------------------------------------
  epd_encoder_mm_items_per_batch: {
    type: 'histogram',
    help: 'Media items fused into one model forward',
    labels: [],
    sglang: 'sglang:encoder_mm_items_per_batch',
  },
  epd_encoder_requests_per_batch: {
    type: 'histogram',
    help: 'Requests fused into one model forward (_count: forwards run)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_mm_items_per_request: {
    type: 'histogram',
    help: 'Media items per successful encode request',
    labels: modality,
    sglang: 'sglang:encoder_mm_items_per_request',
  },
  epd_encoder_tokens_per_request: {
    type: 'histogram',
    help: 'Embedding tokens (embedding_len) per successful encode request',
    labels: modality,
    sglang: 'none',
  },
  // --- Forward queue and staging --------------------------------------------------------
  epd_encoder_queue_depth: {
    type: 'gauge',
    help: 'Preprocessed requests waiting for a forward',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_staged_bytes: {
    type: 'gauge',
    help: 'Bytes held against EPD_STAGING_MAX_BYTES (reserved and staged)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_work_bytes: {
    type: 'gauge',
    help: 'Working memory held against EPD_WORK_MAX_BYTES: media being loaded, and planned decode and model input until the forward ends (0 when idle)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_work_waiting: {
    type: 'gauge',
    help: 'Planned parts waiting for room in EPD_WORK_MAX_BYTES (0 when idle)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_work_admissions_total: {
    type: 'counter',
    help: 'Planned parts against EPD_WORK_MAX_BYTES, by outcome: immediate, waited (let in after a wait), busy (503 memory_busy: no room for a load, or none before the deadline), too_large (507 work_too_large)',
    labels: ['outcome'],
    sglang: 'none',
  },
  epd_encoder_staged_oldest_age_seconds: {
    type: 'gauge',
    help: 'Age of the oldest staged embedding not yet released (0 when none): a receiver that never fetches shows here long before EPD_SEND_TIMEOUT_MS',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_releases_total: {
    type: 'counter',
    help: 'Request states freed, by reason: ack (every receiver acked), explicit (release call or admin), ttl (idle past EPD_SEND_TIMEOUT_MS), error (the encode failed)',
    labels: ['reason'],
    sglang: 'none',
  },
  // --- Metadata registry ----------------------------------------------------------------
  epd_encoder_registry_entries: {
    type: 'gauge',
    help: 'Published metadata entries held by the registry',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_registry_waiters: {
    type: 'gauge',
    help: 'Pending metadata waits',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_registry_oldest_entry_age_seconds: {
    type: 'gauge',
    help: 'Age of the oldest published entry (0 when none)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_registry_events_total: {
    type: 'counter',
    help: 'Registry events: publish, error_publish ({error} metadata), wait (started), resolved, timeout (504), cancelled, rejected (bound reached or shutting down), failed (shutdown or store error), discard (release or admin), expired (TTL sweep)',
    labels: ['event'],
    sglang: 'none',
  },
  epd_encoder_wait_metadata_total: {
    type: 'counter',
    help: 'wait_metadata calls (NATS and HTTP) by outcome: ok, timeout (504 encode metadata not ready), error (an {error} entry, embedding lost, or a refusal), cancelled (the caller went away)',
    labels: ['outcome'],
    sglang: 'none (SGLang has no metric for the metadata wait)',
  },
  epd_encoder_wait_metadata_seconds: {
    type: 'histogram',
    help: 'wait_metadata latency by outcome, from the call to its answer',
    labels: ['outcome'],
    sglang: 'none',
  },
  // --- Data plane ------------------------------------------------------------------------
  epd_encoder_sends_total: {
    type: 'counter',
    help: "Embedding deliveries to a receiver by outcome: acked (the receiver's ack came back) or failed",
    labels: ['outcome'],
    sglang: 'none',
  },
  epd_encoder_send_seconds: {
    type: 'histogram',
    help: "One delivery, from the frame's first byte to the receiver's ack, by backend (tcp or zmq)",
    labels: ['backend'],
    sglang: 'sglang:encoder_transfer_seconds',
  },
  epd_encoder_sent_bytes_total: {
    type: 'counter',
    help: 'Embedding bytes delivered and acked',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_send_callers_gone_total: {
    type: 'counter',
    help: 'HTTP /send callers that disconnected while their delivery was under way (answered 499 caller_gone; the delivery goes on while another caller waits for it)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_send_callers: {
    type: 'gauge',
    help: 'HTTP /send callers waiting on a delivery now (a caller that disconnects leaves it; the delivery goes on while another caller waits for it)',
    labels: [],
    sglang: 'none',
  },
  // --- vLLM's encode-instance face (EPD_VLLM_EC_PATH) ---------------------------------------
  epd_encoder_vllm_ec_files: {
    type: 'gauge',
    help: 'Files under EPD_VLLM_EC_PATH this process keeps (written, or found at start) until their TTL or the byte budget',
    labels: [],
    sglang: 'none',
    only: 'one process (EPD_DP_SIZE = 1)',
  },
  epd_encoder_vllm_ec_bytes: {
    type: 'gauge',
    help: 'Bytes of those files, against EPD_VLLM_EC_MAX_BYTES',
    labels: [],
    sglang: 'none',
    only: 'one process (EPD_DP_SIZE = 1)',
  },
  epd_encoder_vllm_ec_writes_total: {
    type: 'counter',
    help: 'EC files written for vLLM consumers by outcome: ok, or failed (disk full, not writable, too large; no partial file is left)',
    labels: ['outcome'],
    sglang: 'none',
    only: 'one process (EPD_DP_SIZE = 1)',
  },
  epd_encoder_vllm_ec_evictions_total: {
    type: 'counter',
    help: 'EC files deleted by reason: ttl (not re-published within EPD_VLLM_EC_TTL_S), budget (room for a newer one); empty_dir: directories consumers left on a miss',
    labels: ['reason'],
    sglang: 'none',
    only: 'one process (EPD_DP_SIZE = 1)',
  },
  epd_encoder_vllm_proxies_registered: {
    type: 'gauge',
    help: 'vLLM disagg proxies (EPD_VLLM_PROXY_URL) whose last announcement of this instance they accepted',
    labels: [],
    sglang: 'none',
    only: 'one process (EPD_DP_SIZE = 1)',
  },
  epd_encoder_transfer_connections: {
    type: 'gauge',
    help: 'Data-plane connections (TCP) or sockets (ZMQ) open to receivers',
    labels: [],
    sglang: 'none',
  },
  // --- NATS calls --------------------------------------------------------------------------
  epd_encoder_nats_shed_total: {
    type: 'counter',
    help: 'NATS calls answered 503 overloaded at once because the queue ahead of them was longer than EPD_OVERLOAD_QUEUE_MS, by dp_type',
    labels: ['dp_type'],
    sglang: 'none',
  },
  epd_encoder_nats_step_outs_total: {
    type: 'counter',
    help: 'Times this process withdrew from the queue group of the shared subjects while shedding (EPD_OVERLOAD_STEP_OUT); NATS routed their calls to the instances that stayed in meanwhile',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_step_outs_refused_total: {
    type: 'counter',
    help: 'Times this process would have stepped out of the queue group but stayed in: no other live instance was known to stay in (a lone instance, or the roster anchor, never steps out)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_out_of_group_seconds_total: {
    type: 'counter',
    help: 'Time this process spent out of the queue group of the shared subjects while shedding',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_out_of_group: {
    type: 'gauge',
    help: '1 while this process is out of the queue group of the shared subjects (shedding), else 0',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_shedding: {
    type: 'gauge',
    help: '1 while this process sheds in the queue group (it shed a call within EPD_OVERLOAD_QUEUE_MS and could not step out) and so keeps only EPD_OVERLOAD_SHEDDING_QUEUE_MS of calls queued, else 0',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_shedding_spells_total: {
    type: 'counter',
    help: 'Spells of shedding in the queue group begun (see epd_encoder_nats_shedding): how often load went past what this process sustains',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_queue_depth: {
    type: 'gauge',
    help: 'NATS calls received and waiting for their handler',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_queue_oldest_seconds: {
    type: 'gauge',
    help: 'How long the oldest NATS call waiting for its handler has waited',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_nats_repeated_calls_total: {
    type: 'counter',
    help: 'Sends of a call this process had already taken under the receipt protocol (same Epd-Call id): joined the call still running (a probe, or a resend whose receipt was lost), replayed its answer (lost in transit), untracked (the call ledger was full; the call ran again), or unknown (a probe of a call not known here: not run, the caller finds the callee unreachable)',
    labels: ['outcome'],
    sglang: 'none',
  },
  epd_encoder_nats_calls_tracked: {
    type: 'gauge',
    help: 'Calls under the receipt protocol this process keeps by id (running, or answered and kept 5 s past their deadline for a repeat); at most 10,000',
    labels: [],
    sglang: 'none',
  },
  // --- Instances and owner routing --------------------------------------------------------
  epd_encoder_owner_routing_total: {
    type: 'counter',
    help: 'Per-req_id calls by where they were answered: here (local), by the owner instance (forwarded), by the DP worker that owns it (dp_rank), here after taking over an embedding a stopped instance handed to the object store (from_store), or refused because the owner is gone (owner_gone) or never acknowledged the forwarded call (owner_unreachable); resent counts forwarded attempts sent again after 300 ms without a receipt from the owner (lost in transit); probes counts forwarded calls asked again every 500 ms after the owner took them (an answer lost in transit is replayed)',
    labels: ['outcome'],
    sglang: 'none',
  },
  epd_encoder_buckets_recreated_total: {
    type: 'counter',
    help: "Shared buckets (roster, cache claims, object store) found deleted and made again with this service's settings, by bucket (the metadata bucket: epd_encoder_registry_*)",
    labels: ['bucket'],
    sglang: 'none',
  },
  epd_encoder_instances_alive: {
    type: 'gauge',
    help: 'Instances in the roster with a heartbeat in the last three beats (this one included; 1 without a shared store)',
    labels: [],
    sglang: 'none',
  },
  // --- Autoscaling signal (the same on every instance within a heartbeat) -----------------
  epd_encoder_desired_replicas: {
    type: 'gauge',
    help: 'Encoders the whole cluster needs: utilization under EPD_SCALE_TARGET_UTILIZATION and queue age under EPD_SCALE_TARGET_QUEUE_MS, lowered only after EPD_SCALE_IN_STABLE_S, within [EPD_SCALE_MIN, EPD_SCALE_MAX] (docs/scaling.md, Autoscaling)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_instances: {
    type: 'gauge',
    help: 'Live instances the autoscaling signal was computed from (the roster; this one alone without the shared store)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_arrival_rate: {
    type: 'gauge',
    help: 'Media items admitted per second over the last 30 s, summed over live instances (refused ones included: demand)',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_service_rate: {
    type: 'gauge',
    help: 'Media items one encoder completes per second of busy time at the current mix, measured, averaged over live instances that measured one',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_queue_depth: {
    type: 'gauge',
    help: 'Media items admitted and not yet answered, summed over live instances',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_oldest_queued_seconds: {
    type: 'gauge',
    help: 'Age of the oldest admitted, unanswered request on any live instance',
    labels: [],
    sglang: 'none',
  },
  epd_encoder_cluster_utilization: {
    type: 'gauge',
    help: 'Cluster arrival rate over what the live instances serve (service rate × instances)',
    labels: [],
    sglang: 'none',
  },
  // --- DP workers ---------------------------------------------------------------------------
  epd_encoder_dp_workers: {
    type: 'gauge',
    help: 'DP worker processes by state: alive (ready for calls) or down',
    labels: ['state'],
    sglang: 'none',
    only: 'DP supervisor (EPD_DP_SIZE > 1)',
  },
  epd_encoder_dp_pending_requests: {
    type: 'gauge',
    help: 'Calls in flight from the supervisor to each DP worker (encodes and control calls)',
    labels: ['dp_rank'],
    sglang: 'sglang:encoder_dp_pending_requests',
    only: 'DP supervisor (EPD_DP_SIZE > 1)',
  },
  epd_encoder_dp_dispatched_total: {
    type: 'counter',
    help: 'Calls the supervisor sent to each DP worker',
    labels: ['dp_rank'],
    sglang: 'none',
    only: 'DP supervisor (EPD_DP_SIZE > 1)',
  },
  epd_encoder_dp_metrics_scraped: {
    type: 'gauge',
    help: "Whether this scrape of the supervisor's /metrics holds each DP worker's series: 1 if it does, 0 if the worker was not alive or did not answer over IPC within 1 s (its series are then absent from this scrape, not zero)",
    labels: ['dp_rank'],
    sglang: 'none',
    only: 'DP supervisor (EPD_DP_SIZE > 1)',
  },
  epd_encoder_dp_worker_restarts_total: {
    type: 'counter',
    help: 'DP worker respawns after a death',
    labels: ['dp_rank'],
    sglang: 'none',
    only: 'DP supervisor (EPD_DP_SIZE > 1)',
  },
  // --- Embedding cache ------------------------------------------------------------------------
  epd_encoder_cache_lookups_total: {
    type: 'counter',
    help: 'Cache lookups per unit (an image, or a whole video or audio request) by outcome: hit, miss (encoded here), join (another request of this process was encoding it), remote_join (another process owned it: its rows were fetched), store_hit (read from the object store tier)',
    labels: ['outcome'],
    sglang: 'sglang:encoder_cache_hit_files_total / sglang:encoder_cache_total_files_total',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  epd_encoder_cache_claim_takeovers_total: {
    type: 'counter',
    help: 'Claims taken over from an owner that was gone, silent for a lease, or no longer had the entry (that unit was encoded here)',
    labels: [],
    sglang: 'none',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  epd_encoder_cache_peer_fetches_total: {
    type: 'counter',
    help: 'Rows moved between processes for single flight: served (to a joiner elsewhere), fetched (from an owner elsewhere), unusable (the owner could not serve)',
    labels: ['outcome'],
    sglang: 'none',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  epd_encoder_cache_evictions_total: {
    type: 'counter',
    help: 'Entries evicted to keep the cache within EPD_CACHE_MAX_BYTES',
    labels: [],
    sglang: 'sglang:encoder_cache_evictions_total',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  epd_encoder_cache_bytes: {
    type: 'gauge',
    help: 'Bytes of cached embeddings (EPD_CACHE_MAX_BYTES bounds it)',
    labels: [],
    sglang: 'sglang:encoder_cache_size_mb (ours in bytes)',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  epd_encoder_cache_entries: {
    type: 'gauge',
    help: 'Cached embeddings',
    labels: [],
    sglang: 'sglang:encoder_cache_entries',
    only: 'EPD_CACHE_MAX_BYTES > 0',
  },
  // --- Object store tier ----------------------------------------------------------------
  epd_encoder_object_store_reads_total: {
    type: 'counter',
    help: 'Object store reads on an in-process cache miss by outcome: hit, absent, corrupt (checksum, layout or sizes disagree: never served, encoded again), error (store unreachable or slow: a miss)',
    labels: ['outcome'],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
  epd_encoder_object_store_writes_total: {
    type: 'counter',
    help: 'Cached embeddings written to the object store by outcome: ok, failed, dropped (the write queue, EPD_OBJ_WRITE_QUEUE, was full)',
    labels: ['outcome'],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
  epd_encoder_object_store_bytes_total: {
    type: 'counter',
    help: "Cached embedding bytes moved to (written) and from (read) the object store (the staged bucket's: GET /admin/handoff)",
    labels: ['direction'],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
  epd_encoder_object_store_handoffs_total: {
    type: 'counter',
    help: 'Staged embeddings handed to the cluster through the object store: written (at shutdown), failed (not written: reported lost), taken (served by this instance after another stopped), deleted (released or delivered)',
    labels: ['outcome'],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
  epd_encoder_object_store_write_queue: {
    type: 'gauge',
    help: 'Cached embeddings waiting to be written to the object store (EPD_OBJ_WRITE_QUEUE bounds it)',
    labels: [],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
  epd_encoder_object_store_seconds: {
    type: 'histogram',
    help: 'Object store operation latency by op: get, put, delete',
    labels: ['op'],
    sglang: 'none',
    only: 'EPD_CACHE_STORE=jetstream',
  },
});

export type MetricName = keyof typeof METRICS;
type LabelsOf<N extends MetricName> = (typeof METRICS)[N]['labels'][number];

/** The name, help and label names of a catalogued family, for prom-client's constructors. */
export function family<N extends MetricName>(
  name: N,
): { name: N; help: string; labelNames: readonly LabelsOf<N>[] } {
  const m: MetricSpec = METRICS[name];
  return { name, help: m.help, labelNames: m.labels as readonly LabelsOf<N>[] };
}
