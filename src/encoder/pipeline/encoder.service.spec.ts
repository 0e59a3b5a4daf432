import { LifecycleEvents } from '../../common/lifecycle-events';
import { waitFor } from '../../../test/support/wait';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from '../../common/clock';
import { Readiness } from '../../common/readiness';
import { Errors } from '../../common/errors/error-catalogue';
import { Test } from '@nestjs/testing';
import { AppConfig } from '../../config/app-config';
import { DeliveryService } from '../../delivery/delivery.service';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import { makeRegistry } from '../../meta-registry/testing';
import { ProfilerService } from '../../profiling/profiler.service';
import { ReqStateStore } from '../../requests/req-state.store';
import { EncoderBackend } from '../backend/encoder-backend';
import type { ForwardResult, ForwardTask, ModelInfo } from '../backend/forward.types';
import { MediaLoader } from '../../media/media-loader.service';
import type { MediaPlan, PreprocessResult } from '../preprocess/preprocess.types';
import { Preprocessor } from '../preprocess/preprocessor.service';
import { EncodeScheduler } from '../scheduler/encode-scheduler.service';
import { parseEncodeRequest } from '../encode-request.schema';
import { DEFAULT_GEOMETRY, patchDim } from '../../common/vision-geometry';
import { EncodeAdmission } from './encode-admission.service';
import { ClusterClaims } from '../../cache/claims.providers';
import { ADMISSION_PROVIDERS } from './admission.providers';
import { EncodeStages } from './encode-stages.service';
import { EncoderMetrics } from './encoder.metrics';
import { NatsConnectionService } from '../../transport/nats-connection.service';
import { ProcessRole } from '../../config/process-role';
import { ParentLink } from '../../transport/parent-link';
import { EncodeCache } from '../../cache/encode-cache.service';
import { BucketKeeper } from '../../jetstream/bucket-keeper';
import { EncodeFlights } from '../../cache/encode-flights.service';
import { ObjectTier } from '../../cache/object-tier';
import { ObjectBuckets } from '../../jetstream/object-buckets';
import { EmbeddingEncoder } from './embedding-encoder.service';
import { EncoderService } from './encoder.service';

const DIM = 8;
const TOKENS = 4; // one 56x56 image: grid (1, 4, 4), 16 patches, 4 merged tokens

/** A backend whose forward waits for `release()` (or fails with `fail()`). */
class GatedBackend extends EncoderBackend {
  forwards = 0;
  private gate?: { resolve: () => void; reject: (e: Error) => void };
  info(): Promise<ModelInfo> {
    return Promise.resolve({
      visionDim: DIM,
      visionModels: { v: { dim: DIM, path: 'v' } },
      audioDim: DIM,
      audioMels: 128,
      visionPath: 'v',
      audioPath: 'a',
    });
  }
  async forward(task: ForwardTask): Promise<ForwardResult> {
    this.forwards++;
    await new Promise<void>((resolve, reject) => (this.gate = { resolve, reject }));
    return {
      dim: DIM,
      forwardMs: 1,
      outputs: task.parts.map((p) => ({
        data: new Float32Array(p.tokens * DIM).fill(1),
        tokens: p.tokens,
      })),
    };
  }
  get waiting(): boolean {
    return this.gate !== undefined;
  }
  release(): void {
    this.gate?.resolve();
    this.gate = undefined;
  }
  fail(err: Error): void {
    this.gate?.reject(err);
    this.gate = undefined;
  }
}

const plan: MediaPlan = {
  ok: true,
  tokens: TOKENS,
  itemTokens: [TOKENS],
  itemSizes: [[56, 56]],
  decodedPixels: 56 * 56,
  sourceFrames: 0,
  keptFrames: 0,
  audioSeconds: 0,
  decodedAudioBytes: 0,
  inputBytes: 0,
};
const preprocessed = (): PreprocessResult => ({
  ok: true,
  kind: 'vision',
  data: new Float32Array(16 * patchDim(DEFAULT_GEOMETRY)),
  rows: 16,
  grids: [[1, 4, 4]],
  featureLens: [],
  windowTokens: [],
  tokens: TOKENS,
  ms: 1,
});

// File reads (the cache hashes the model file once) complete in libuv's thread pool: wait in
// real time, briefly, for what they lead to.
const until = (cond: () => boolean) => waitFor(cond, 2000, 1);

const request = (reqId: string) =>
  parseEncodeRequest({
    req_id: reqId,
    modality: 'image',
    mm_items: ['data:image/png;base64,AAAA'],
    num_parts: 1,
    part_idx: 0,
  });
const deadline = () => Date.now() + 10_000;

/** A stand-in for what the test does not look at: every method a no-op. */
const inert = <T extends string>(...methods: T[]) =>
  Object.fromEntries(methods.map((m) => [m, () => undefined])) as Record<T, () => undefined>;

/**
 * The service as Nest wires it, on the real registry, request state, scheduler, stages and
 * cache, with the outside world (media, preprocessing, the model, delivery) replaced.
 */
async function wire(
  env: Record<string, string>,
  backend: EncoderBackend,
  fake: Pick<Preprocessor, 'plan' | 'run'>,
  delivery: Partial<DeliveryService>,
  realMetrics = false,
) {
  // One served model, the default, as a process without EPD_MODEL_DIR has.
  const preprocessor = {
    ...fake,
    defaultModel: 'v',
    models: new Map([['v', { name: 'v' }]]),
  } as unknown as Preprocessor;
  const { registry, config } = makeRegistry(env);
  const moduleRef = await Test.createTestingModule({
    providers: [
      Clock,
      LifecycleEvents,
      Readiness,
      { provide: AppConfig, useValue: config },
      { provide: ProcessRole, useValue: new ProcessRole('single', 0) },
      { provide: MetaRegistry, useValue: registry },
      { provide: EncoderBackend, useValue: backend },
      { provide: Preprocessor, useValue: preprocessor },
      { provide: MediaLoader, useValue: { load: () => Promise.resolve(Buffer.from('png')) } },
      { provide: ProfilerService, useValue: inert('step') },
      // The memory store, one process: the cache's single flight is in-process (no NATS).
      { provide: NatsConnectionService, useValue: {} },
      { provide: BucketKeeper, useValue: { nats: {}, keep: () => undefined } },
      // No object store: the cache is in memory only.
      { provide: ObjectBuckets, useValue: { enabled: false, bucket: () => ({ isOpen: false }) } },
      { provide: ClusterClaims, useValue: new ClusterClaims('in_process') },
      {
        provide: DeliveryService,
        useValue: {
          failed: () => Promise.resolve(),
          checkTargets: () => Promise.resolve(),
          ...delivery,
        },
      },
      // One EncoderMetrics per process (prom-client's registry is global): others get a stub.
      realMetrics
        ? EncoderMetrics
        : {
            provide: EncoderMetrics,
            useValue: inert('received', 'request'),
          },
      EncodeScheduler,
      ReqStateStore,
      { provide: ParentLink, useValue: new ParentLink(undefined) },
      ...ADMISSION_PROVIDERS,
      EncodeAdmission,
      EncodeStages,
      EncodeCache,
      ObjectTier,
      EncodeFlights,
      EmbeddingEncoder,
      EncoderService,
    ],
  }).compile();
  return {
    service: moduleRef.get(EncoderService),
    registry,
    states: moduleRef.get(ReqStateStore),
    cache: moduleRef.get(EncodeCache),
  };
}

/**
 * EncoderService with fakes for the outside world (media, preprocessing, the model,
 * delivery) and the real registry, request state and scheduler.
 */
describe('EncoderService', () => {
  const backend = new GatedBackend();
  const afterStage = jest.fn<ReturnType<DeliveryService['afterStage']>, []>(() =>
    Promise.resolve(undefined),
  );
  const preprocessor = {
    plan: () => Promise.resolve(plan),
    run: () => Promise.resolve(preprocessed()),
  };
  let service: EncoderService;
  let registry: MetaRegistry;
  let states: ReqStateStore;
  beforeAll(async () => {
    ({ service, registry, states } = await wire({}, backend, preprocessor, { afterStage }, true));
  });

  afterEach(() => afterStage.mockReset().mockResolvedValue(undefined));

  it('publishes the metadata before the forward runs, and stages the embedding after it', async () => {
    const encoding = service.encode(request('m1'), deadline());
    await until(() => backend.waiting);
    // The forward has not returned, yet a receiver can already size its buffer.
    expect((await registry.get('m1'))?.metadata).toEqual({
      embedding_size: TOKENS * DIM * 4,
      embedding_len: TOKENS,
      embedding_dim: DIM,
    });
    expect(states.get('m1')?.embedding).toBeUndefined();
    backend.release();
    expect(await encoding).toMatchObject({
      req_id: 'm1',
      embedding_len: TOKENS,
      embedding_dim: DIM,
    });
    expect(states.get('m1')?.embedding?.bytes).toBe(TOKENS * DIM * 4);
    states.release('m1');
  });

  it('publishes {error} when the forward fails, and frees the request state and its bytes', async () => {
    const encoding = service.encode(request('m2'), deadline());
    await until(() => backend.waiting);
    backend.fail(new Error('onnx exploded'));
    await expect(encoding).rejects.toThrow();
    // Waiters learn the real reason at once, not at their deadline.
    expect((await registry.get('m2'))?.metadata).toEqual({ error: 'onnx exploded' });
    expect(states.get('m2')).toBeUndefined();
    expect(states.stats().usedBytes).toBe(0);
  });

  it('keeps the staged embedding when a delivery after staging fails, so the receiver can retry', async () => {
    afterStage.mockRejectedValueOnce(Errors.deliveryFailed('127.0.0.1:9', 'refused', 'm3'));
    const encoding = service.encode(request('m3'), deadline());
    await until(() => backend.waiting);
    backend.release();
    await expect(encoding).rejects.toMatchObject({ code: 500, type: 'delivery_failed' });
    expect(states.get('m3')?.embedding?.bytes).toBe(TOKENS * DIM * 4);
    // The metadata stays the embedding's, not an {error}: the embedding is good.
    expect((await registry.get('m3'))?.metadata).toMatchObject({ embedding_len: TOKENS });
    states.release('m3');
  });

  it('refuses a duplicate active req_id with 409 and admits again after release', async () => {
    const first = service.encode(request('dup'), deadline());
    await until(() => backend.waiting);
    await expect(service.encode(request('dup'), deadline())).rejects.toMatchObject({
      code: 409,
      type: 'duplicate_request',
    });
    backend.release();
    await first;
    states.release('dup');
    expect(states.stats()).toMatchObject({ states: 0, usedBytes: 0 });
  });
});

describe('EncoderService with the embedding cache (single flight in process)', () => {
  const model = join(mkdtempSync(join(tmpdir(), 'epd-cache-')), 'v.onnx');
  writeFileSync(model, 'a model');
  class ModelBackend extends GatedBackend {
    override info(): Promise<ModelInfo> {
      return super
        .info()
        .then((i) => ({ ...i, visionPath: model, visionModels: { v: { dim: DIM, path: model } } }));
    }
  }
  const backend = new ModelBackend();
  let planFails = false;
  /** The next plan waits for this, and (with `bigPlan`) is over the request's token cap. */
  let planGate: Promise<void> | undefined;
  let bigPlan = false;
  const preprocessor = {
    plan: async () => {
      if (planGate) await planGate;
      if (bigPlan) {
        bigPlan = false;
        return { ...plan, tokens: 400, itemTokens: [400] };
      }
      return planFails
        ? { ok: false as const, stage: 'load' as const, itemIndex: 0, message: 'not an image' }
        : plan;
    },
    run: () => Promise.resolve(preprocessed()),
  };
  let service: EncoderService;
  let states: ReqStateStore;
  let cache: EncodeCache;
  beforeAll(async () => {
    ({ service, states, cache } = await wire(
      { EPD_CACHE_MAX_BYTES: String(1 << 20), EPD_MAX_TOKENS_PER_REQUEST: '100' },
      backend,
      preprocessor,
      { afterStage: () => Promise.resolve(undefined) },
    ));
  });

  afterEach(() => {
    cache.store.purge();
    for (const s of states.list()) states.release(s.reqId);
  });

  it('a joiner gets the owner rows even when the owner is released during its forward', async () => {
    const before = backend.forwards;
    const owner = service.encode(request('own'), deadline());
    await until(() => backend.waiting);
    const joiner = service.encode(request('join'), deadline());
    await until(() => cache.store.view().joins === 1);
    states.release('own');
    backend.release();
    await expect(owner).rejects.toMatchObject({ type: 'released' });
    await expect(joiner).resolves.toMatchObject({ timings: { cache_joins: 1, batch_size: 0 } });
    expect(backend.forwards).toBe(before + 1);
  });

  it('a joiner encodes the unit itself when the owner forward failed', async () => {
    const before = backend.forwards;
    const owner = service.encode(request('own2'), deadline());
    await until(() => backend.waiting);
    const joiner = service.encode(request('join2'), deadline());
    await until(() => cache.store.view().joins >= 1);
    backend.fail(new Error('onnx exploded'));
    await expect(owner).rejects.toThrow('onnx exploded');
    await until(() => backend.waiting); // the joiner's own forward
    backend.release();
    await expect(joiner).resolves.toMatchObject({ timings: { cache_hits: 0, batch_size: 1 } });
    expect(backend.forwards).toBe(before + 2);
    expect(cache.store.view().in_flight).toBe(0);
  });

  it("a joiner encodes the unit itself when the owner request fails for its own limit (not the media's)", async () => {
    let open!: () => void;
    planGate = new Promise((r) => (open = r));
    bigPlan = true;
    const owner = service.encode(request('lim-own'), deadline());
    await until(() => cache.store.view().in_flight === 1);
    const joiner = service.encode(request('lim-join'), deadline());
    await until(() => cache.store.view().joins >= 1);
    planGate = undefined;
    open();
    await expect(owner).rejects.toMatchObject({ code: 413, type: 'limit_exceeded' });
    await until(() => backend.waiting);
    backend.release();
    await expect(joiner).resolves.toMatchObject({ timings: { batch_size: 1 } });
  });

  it('media that fails for its owner fails its joiners too, with the same 400', async () => {
    planFails = true;
    try {
      const [a, b] = await Promise.allSettled([
        service.encode(request('bad1'), deadline()),
        service.encode(request('bad2'), deadline()),
      ]);
      for (const r of [a, b]) {
        expect(r).toMatchObject({ status: 'rejected', reason: { code: 400, type: 'load_failed' } });
      }
      expect(cache.store.view().in_flight).toBe(0);
    } finally {
      planFails = false;
    }
  });
});
