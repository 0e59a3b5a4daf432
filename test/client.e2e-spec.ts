import { waitFor } from './support/wait';
import { EncoderClient, MMError } from '../src/client';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };

describe('EncoderClient SDK (e2e)', () => {
  let t: TestApp;
  let client: EncoderClient;

  beforeAll(async () => {
    t = await startTestApp();
    client = await EncoderClient.connect({
      servers: sharedNatsUrl(),
      subjectPrefix: t.config.nats.subjectPrefix,
      retry: { baseDelayMs: 20, landingDelayMs: 10 },
    });
  });
  afterAll(async () => {
    await client.close();
    await t.close();
  });

  it('publishes, checks and waits', async () => {
    await client.publishMetadata('c1', META, { partIdx: 1 });
    expect(await client.hasMetadata('c1')).toBe(true);
    expect(await client.waitMetadata('c1')).toEqual({ ...META, req_id: 'c1', part_idx: 1 });
  });

  it('retries a 504 and succeeds when the publish lands during the second attempt', async () => {
    const attempts: number[] = [];
    const result = await client.waitMetadata('c2', {
      timeoutMs: 500,
      onAttempt: (n) => {
        attempts.push(n);
        // Publish once the second attempt's wait is registered on the server.
        if (n === 2) void publishOnceWaiting(t, client, 'c2');
      },
    });
    expect(attempts).toEqual([1, 2]);
    expect(result).toMatchObject({ ...META, req_id: 'c2' });
  });

  it('gives up after the configured attempts with the 504', async () => {
    const attempts: number[] = [];
    const err = await client
      .waitMetadata('c3', { timeoutMs: 50, onAttempt: (n) => attempts.push(n) })
      .catch((e: unknown) => e);
    expect(attempts).toEqual([1, 2, 3]);
    expect(err).toBeInstanceOf(MMError);
    expect(err).toMatchObject({ code: 504, message: 'encode metadata not ready' });
  });

  it('does not retry a non-504 error', async () => {
    await client.publishMetadata('c4', {
      error: 'Encoder produced 3 tokens, but preprocessor metadata expected 4',
    });
    const attempts: number[] = [];
    const err = await client
      .waitMetadata('c4', { onAttempt: (n) => attempts.push(n) })
      .catch((e: unknown) => e);
    expect(attempts).toEqual([1]);
    expect(err).toMatchObject({
      code: 500,
      message: 'Encoder produced 3 tokens, but preprocessor metadata expected 4',
    });
  });

  it('throws 400 MMErrors for invalid requests without retrying', async () => {
    // has_metadata accepts the req_id, so the 400 comes from wait_metadata, inside the
    // retry loop: exactly one attempt is made.
    const attempts: number[] = [];
    const err = await client
      .waitMetadata('valid-id', { partIdx: -1, onAttempt: (n) => attempts.push(n) })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 400, type: 'invalid_request' });
    expect(attempts).toEqual([1]);
  });

  it('maps a payload over the NATS max_payload to 413 at once', async () => {
    const started = Date.now();
    const err = await client
      .publishMetadata('x'.repeat(5 * 1024 * 1024), META)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 413 });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('maps "nobody serves this subject" to 503 at once', async () => {
    const lonely = await EncoderClient.connect({
      connection: client.connection,
      subjectPrefix: 'nobody-here',
    });
    const err = await lonely.hasMetadata('x').catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 503,
      message:
        'no encoder is serving nobody-here.v1.has_metadata (none running, or all overloaded); retry',
    });
  });
});

async function publishOnceWaiting(t: TestApp, client: EncoderClient, reqId: string): Promise<void> {
  await waitFor(async () => (await t.registry.stats()).waiters > 0);
  await client.publishMetadata(reqId, META);
}
