import { forwardPart } from '../src/encoder/preprocess/preprocess.types';
import { image } from './support/media';
import { encodeThreads } from './support/encode-threads';

/**
 * fused-batch-retry-wedges-scheduler: a fused forward that failed was retried request by
 * request with the inputs the main thread still had, but those had been transferred to
 * the inference thread (detached). piscina never settled a task whose transfer list held
 * a detached buffer, so the retry hung: the scheduler stayed `running` for good, and every
 * later encode of the process waited for its deadline (reproduced at 06cf683: the good
 * request and the one after it never settled until the pool was destroyed). The
 * inference thread now hands a failed batch's inputs back, and the backend refuses a
 * detached input at once. Real worker threads and ONNX Runtime.
 */
describe('a failed fused forward (e2e, real worker threads)', () => {
  const { preprocessor, backend, scheduler, close, job } = encodeThreads();

  afterAll(close);

  const preprocessed = async (w: number, h: number) => {
    const pre = await preprocessor.run('image', [await image(w, h)], 128);
    if (!pre.ok) throw new Error(pre.message);
    return pre;
  };

  it('retries each request alone with its own input: the good ones succeed, the bad one fails alone', async () => {
    await backend.info();
    const [first, good, bad] = await Promise.all([
      preprocessed(56, 56),
      preprocessed(112, 84),
      preprocessed(84, 56),
    ]);
    const badJob = job('bad', bad);
    // Tokens its rows do not give: the fused forward of [good, bad] fails.
    badJob.part.tokens += 1;
    // `first` runs at once; the other two queue meanwhile and fuse into one forward.
    const results = await Promise.allSettled([
      scheduler.submit(job('first', first)),
      scheduler.submit(job('good', good)),
      scheduler.submit(badJob),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const [, goodResult] = results as PromiseFulfilledResult<{ output: { tokens: number } }>[];
    expect(goodResult!.value.output.tokens).toBe(good.tokens);
    expect(scheduler.stats()).toMatchObject({ isolationRetries: 1, batchSizes: { 1: 2 } });
  });

  it('keeps serving after the failed batch: the next request runs', async () => {
    const pre = await preprocessed(56, 56);
    const result = await scheduler.submit(job('after', pre));
    expect(result.output.tokens).toBe(pre.tokens);
    expect(scheduler.stats().queued).toBe(0);
  });

  it('refuses an input that was already handed to the inference thread, instead of hanging', async () => {
    const pre = await preprocessed(56, 56);
    const part = forwardPart(pre);
    await backend.forward({ kind: 'vision', parts: [part], dtype: 'float32' });
    await expect(
      backend.forward({ kind: 'vision', parts: [part], dtype: 'float32' }),
    ).rejects.toThrow('detached');
  });
});
