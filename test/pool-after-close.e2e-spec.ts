import { loadConfig } from '../src/config/config.loader';
import type { AppConfig } from '../src/config/app-config';
import { Preprocessor } from '../src/encoder/preprocess/preprocessor.service';
import { image } from './support/media';

/**
 * `destroyed-pool-revives-threads`: piscina starts fresh threads for a task given to a
 * pool it has closed or destroyed (by design: a destroyed pool keeps no state). A request
 * still in the pipeline at shutdown thus brought the preprocessing threads (libvips, the
 * audio decoders) back up after the module had closed them, in a process on its way out.
 * Reproduced with piscina 5.3.2: run() after destroy() answered, on a new thread. The
 * pools now refuse such a task with 503 "encoder shutting down". Real worker threads.
 */
describe('a worker pool closed for shutdown (e2e, real worker threads)', () => {
  const config = loadConfig({}).config as AppConfig;

  it('refuses new tasks with 503 "encoder shutting down" and starts no thread again', async () => {
    const preprocessor = new Preprocessor(config);
    const png = await image(56, 56);
    const before = await preprocessor.run('image', [png], 128);
    expect(before.ok).toBe(true);
    await preprocessor.onModuleDestroy();
    const threads = () =>
      (preprocessor as unknown as { pool: { threads: unknown[] } }).pool.threads;
    expect(threads()).toHaveLength(0);
    await expect(preprocessor.plan('image', [png])).rejects.toMatchObject({
      code: 503,
      message: 'encoder shutting down',
    });
    await expect(preprocessor.run('image', [png], 128)).rejects.toMatchObject({ code: 503 });
    expect(threads()).toHaveLength(0);
  });
});
