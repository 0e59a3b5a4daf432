import { LifecycleEvents } from '../../common/lifecycle-events';
import { Clock } from '../../common/clock';
import { loadConfig } from '../../config/config.loader';
import { EncoderBackend } from '../backend/encoder-backend';
import type { ForwardResult, ForwardTask, ModelInfo } from '../backend/forward.types';
import { once } from 'node:events';
import { parcelChannel, ship } from '../workers/parcel';
import { EncodeScheduler, type JobSpec } from './encode-scheduler.service';

/** A backend whose forwards finish when the test says so. */
class FakeBackend extends EncoderBackend {
  calls: ForwardTask[] = [];
  private waiting: (() => void)[] = [];
  failWhen: (task: ForwardTask) => boolean = () => false;
  auto = false;

  info(): Promise<ModelInfo> {
    return Promise.resolve({
      visionDim: 4,
      visionModels: { v: { dim: 4, path: '' } },
      audioDim: 4,
      audioMels: 128,
      visionPath: '',
      audioPath: '',
    });
  }

  forward(task: ForwardTask): Promise<ForwardResult> {
    this.calls.push(task);
    return new Promise((resolve, reject) => {
      const finish = () => {
        if (this.failWhen(task))
          return reject(
            new Error('Encoder produced 3 tokens, but preprocessor metadata expected 4'),
          );
        resolve({
          dim: 4,
          forwardMs: 1,
          outputs: task.parts.map((p) => ({
            data: new Float32Array(p.tokens * 4).fill(p.tokens),
            tokens: p.tokens,
          })),
        });
      };
      if (this.auto) finish();
      else this.waiting.push(finish);
    });
  }

  /** Completes the oldest pending forward. */
  finishOne(): void {
    this.waiting.shift()?.();
  }
}

const tick = () => new Promise((r) => setImmediate(r));

describe('EncodeScheduler', () => {
  let backend: FakeBackend;
  let scheduler: EncodeScheduler;
  const job = (reqId: string, over: Partial<JobSpec> = {}): JobSpec => ({
    reqId,
    kind: 'vision',
    fusable: true,
    part: { data: new Float32Array(4), rows: 4, grids: [[1, 2, 2]], windowTokens: [], tokens: 1 },
    items: 1,
    deadline: Date.now() + 60_000,
    ...over,
  });

  beforeEach(() => {
    backend = new FakeBackend();
    const { config } = loadConfig({ EPD_MAX_BATCH_SIZE: '8' });
    scheduler = new EncodeScheduler(backend, config, new Clock(), new LifecycleEvents());
  });

  it('runs an isolated request at once, without a batching window', async () => {
    const p = scheduler.submit(job('a'));
    expect(backend.calls).toHaveLength(1);
    backend.finishOne();
    await expect(p).resolves.toMatchObject({ batchSize: 1, output: { tokens: 1 } });
  });

  it('fuses up to EPD_MAX_BATCH_SIZE requests that queue while a forward runs', async () => {
    const first = scheduler.submit(job('first'));
    const rest = Array.from({ length: 10 }, (_, i) => scheduler.submit(job(`r${i}`)));
    expect(backend.calls).toHaveLength(1);
    backend.finishOne();
    await first;
    await tick();
    expect(backend.calls[1]!.parts).toHaveLength(8);
    backend.finishOne();
    await tick();
    expect(backend.calls[2]!.parts).toHaveLength(2);
    backend.finishOne();
    const results = await Promise.all(rest);
    expect(results.map((r) => r.batchSize)).toEqual([...Array(8).fill(8), 2, 2]);
    expect(scheduler.stats().batchSizes).toEqual({ 1: 1, 8: 1, 2: 1 });
    expect(scheduler.stats()).toMatchObject({ batches: 3, fusedBatches: 2 });
  });

  it('never fuses video, nor vision with audio', async () => {
    backend.auto = false;
    const blocker = scheduler.submit(job('block'));
    const v1 = scheduler.submit(job('v1', { fusable: false }));
    const v2 = scheduler.submit(job('v2', { fusable: false }));
    const a1 = scheduler.submit(job('a1', { kind: 'audio' }));
    const i1 = scheduler.submit(job('i1'));
    backend.auto = true;
    backend.finishOne();
    await Promise.all([blocker, v1, v2, a1, i1]);
    expect(backend.calls.map((c) => c.parts.length)).toEqual([1, 1, 1, 1, 1]);
    expect(backend.calls.map((c) => c.kind)).toEqual([
      'vision',
      'vision',
      'vision',
      'audio',
      'vision',
    ]);
  });

  it("fuses a model's requests with its own only, and runs each batch on its model", async () => {
    backend.auto = false;
    const blocker = scheduler.submit(job('block'));
    const q3a = scheduler.submit(job('q3a', { model: 'q3' }));
    const d1 = scheduler.submit(job('d1'));
    const q3b = scheduler.submit(job('q3b', { model: 'q3' }));
    const d2 = scheduler.submit(job('d2'));
    backend.auto = true;
    backend.finishOne();
    await Promise.all([blocker, q3a, d1, q3b, d2]);
    expect(backend.calls.map((c) => [c.model ?? 'default', c.parts.length])).toEqual([
      ['default', 1],
      ['q3', 2],
      ['default', 2],
    ]);
  });

  it("gives each model its turn: a flood of one model's videos delays another model's request by one forward, not the flood", async () => {
    const blocker = scheduler.submit(job('block'));
    // Ten unfusable requests of the default model queue first, then one of q3.
    const flood = Array.from({ length: 10 }, (_, i) =>
      scheduler.submit(job(`f${i}`, { fusable: false })),
    );
    const q3 = scheduler.submit(job('q3', { model: 'q3' }));
    backend.auto = true;
    backend.finishOne();
    await Promise.all([blocker, ...flood, q3]);
    const order = backend.calls.map((c) => c.model ?? 'default');
    // The blocker (default) ran; q3 had not had a turn yet, so it went next.
    expect(order.slice(0, 3)).toEqual(['default', 'q3', 'default']);
    expect(order.filter((m) => m === 'default')).toHaveLength(11);
    // One model alone keeps arrival order.
    backend.calls = [];
    backend.auto = false;
    const b2 = scheduler.submit(job('b2', { fusable: false }));
    const seq = ['s0', 's1', 's2'].map((id) => scheduler.submit(job(id, { fusable: false })));
    backend.auto = true;
    backend.finishOne();
    await Promise.all([b2, ...seq]);
    expect(backend.calls.map((c) => c.parts.length)).toEqual([1, 1, 1, 1]);
  });

  it('skips work whose deadline passed before it ran, answering 504 "encoder batch timed out"', async () => {
    const blocker = scheduler.submit(job('block'));
    const late = scheduler.submit(job('late', { deadline: Date.now() - 1 }));
    const ok = scheduler.submit(job('ok'));
    backend.auto = true;
    backend.finishOne();
    await expect(late).rejects.toMatchObject({ code: 504, message: 'encoder batch timed out' });
    await Promise.all([blocker, ok]);
    expect(backend.calls.flatMap((c) => c.parts)).toHaveLength(2);
    expect(scheduler.stats().skippedExpired).toBe(1);
  });

  it('skips released work before it runs', async () => {
    let released = false;
    const blocker = scheduler.submit(job('block'));
    const gone = scheduler.submit(job('gone', { cancelled: () => released }));
    released = true;
    backend.auto = true;
    backend.finishOne();
    await blocker;
    await expect(gone).rejects.toMatchObject({ message: 'Encoder request was released: gone' });
    expect(backend.calls).toHaveLength(1);
  });

  it('frees the model input parcel of work it skips (expired or released)', async () => {
    const parcel = () => {
      const { send, receive } = parcelChannel();
      ship(send, new Float32Array(4));
      return { port: receive };
    };
    const blocker = scheduler.submit(job('block'));
    const expired = parcel();
    const released = parcel();
    const late = scheduler.submit(
      job('late', { deadline: Date.now() - 1, part: { ...job('x').part, data: expired } }),
    );
    const gone = scheduler.submit(
      job('gone', { cancelled: () => true, part: { ...job('x').part, data: released } }),
    );
    const closed = Promise.all([once(expired.port, 'close'), once(released.port, 'close')]);
    backend.auto = true;
    backend.finishOne();
    await blocker;
    await expect(late).rejects.toMatchObject({ code: 504 });
    await expect(gone).rejects.toMatchObject({ message: 'Encoder request was released: gone' });
    await closed; // both ports closed: their buffers freed now, not at some later collection
  });

  it('retries a failed fused batch request by request, so one bad input fails alone', async () => {
    const blocker = scheduler.submit(job('block'));
    const bad = job('bad');
    const jobs = [job('a'), bad, job('b')].map((j) => scheduler.submit(j));
    backend.failWhen = (t) => t.parts.some((p) => p === bad.part);
    backend.auto = true;
    backend.finishOne();
    await blocker;
    const settled = await Promise.allSettled(jobs);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({
      code: 500,
      message: 'Encoder produced 3 tokens, but preprocessor metadata expected 4',
    });
    expect(backend.calls.map((c) => c.parts.length)).toEqual([1, 3, 1, 1, 1]);
    expect(scheduler.stats().isolationRetries).toBe(1);
  });

  it('lets a priority job (the health probe) jump the queue', async () => {
    const blocker = scheduler.submit(job('block'));
    const normal = scheduler.submit(job('n', { kind: 'audio' }));
    const probe = scheduler.submit(job('probe', { priority: true }));
    backend.auto = true;
    backend.finishOne();
    await Promise.all([blocker, normal, probe]);
    expect(backend.calls[1]!.kind).toBe('vision');
    expect(backend.calls[2]!.kind).toBe('audio');
  });

  it('drains back to an idle, empty queue', async () => {
    backend.auto = true;
    await Promise.all(Array.from({ length: 20 }, (_, i) => scheduler.submit(job(`d${i}`))));
    await tick();
    expect(scheduler.stats()).toMatchObject({ queued: 0, running: false });
    expect(scheduler.busy).toBe(false);
  });
});
