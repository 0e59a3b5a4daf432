import { existsSync } from 'node:fs';
import request from 'supertest';
import { waitFor } from './support/calls';
import { startTestApp, type TestApp } from './support/app';

const META = { embedding_size: 8192, embedding_len: 2, embedding_dim: 1024 };

describe('admin REST, docs and metrics (e2e)', () => {
  /**
   * M15 of "Hardening, third pass": with EPD_HTTP_TRUST_PROXY=true the per-address sign-in
   * throttle counted the caller's X-Forwarded-For, so a new one per attempt was never
   * throttled. Attempts from every address together are throttled too.
   */
  describe('with EPD_HTTP_TRUST_PROXY=true', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({
        EPD_ADMIN_TOKEN: 'correct-horse-battery-staple-0123456789',
        EPD_HTTP_TRUST_PROXY: 'true',
      });
    });
    afterAll(() => t.close());

    it('M15: a new X-Forwarded-For per attempt is still throttled: 429 after 60 attempts a minute', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 64; i++)
        statuses.push(
          (
            await request(t.httpUrl)
              .post('/admin/login')
              .set('X-Forwarded-For', `203.0.113.${i}`)
              .send({ token: `guess-${i}` })
          ).status,
        );
      expect(statuses.slice(0, 60).every((s) => s === 401)).toBe(true);
      expect(statuses.slice(60)).toEqual([429, 429, 429, 429]);
    });
  });

  describe('with EPD_ADMIN_TOKEN set', () => {
    let t: TestApp;
    const auth = { Authorization: 'Bearer correct-horse-battery-staple-0123456789' };
    beforeAll(async () => {
      t = await startTestApp({ EPD_ADMIN_TOKEN: 'correct-horse-battery-staple-0123456789' });
    });
    afterAll(() => t.close());

    it('leaves /metrics open unless EPD_METRICS_REQUIRE_TOKEN is set', async () => {
      expect((await request(t.httpUrl).get('/metrics')).status).toBe(200);
    });

    it('answers 401 without a token, with a wrong token, and with a wrong scheme', async () => {
      for (const headers of [
        {},
        { Authorization: 'Bearer wrong' },
        { Authorization: 'Basic correct-horse' },
      ]) {
        const res = await request(t.httpUrl).get('/admin/registry').set(headers);
        expect(res.status).toBe(401);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.body).toMatchObject({ status: 'error', code: 401 });
      }
    });

    /**
     * N7 (security, second pass): the dashboard cookie was the admin token itself (not
     * revocable by logout), `GET /start_profile` accepted it, and sign-in took ~1,770 wrong
     * guesses a second with no throttle and no log.
     */
    it('N7: sign-in gives a random session, readable only by the dashboard, revoked by logout', async () => {
      const TOKEN = 'correct-horse-battery-staple-0123456789';
      const agent = request(t.httpUrl);
      const login = await agent.post('/admin/login').send({ token: TOKEN });
      expect(login.status).toBe(204);
      const setCookie = String(login.headers['set-cookie']);
      expect(setCookie).toMatch(/HttpOnly/);
      expect(setCookie).toMatch(/SameSite=Strict/);
      const session = /epd_admin_token=([^;]+)/.exec(setCookie)![1]!;
      expect(session).not.toContain(TOKEN);
      expect(session.length).toBeGreaterThanOrEqual(43); // 32 random bytes
      const cookie = `epd_admin_token=${session}`;
      expect((await agent.get('/admin/status').set('Cookie', cookie)).status).toBe(200);
      // Not the admin API, not a state change, not SGLang's GET /start_profile.
      expect((await agent.get('/admin/registry').set('Cookie', cookie)).status).toBe(401);
      expect((await agent.get('/start_profile').set('Cookie', cookie)).status).toBe(401);
      expect((await agent.post('/admin/requests/x/release').set('Cookie', cookie)).status).toBe(
        401,
      );
      // Logout revokes the session itself, not only the browser's copy.
      expect((await agent.post('/admin/logout').set('Cookie', cookie)).status).toBe(204);
      expect((await agent.get('/admin/status').set('Cookie', cookie)).status).toBe(401);
    });

    it('N7: sign-in is throttled per address: 429 after 10 attempts a minute', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++)
        statuses.push(
          (
            await request(t.httpUrl)
              .post('/admin/login')
              .send({ token: `guess-${i}` })
          ).status,
        );
      // The N7 test above used one attempt of this minute's 10.
      expect(statuses.filter((s) => s === 401).length).toBe(9);
      expect(statuses.slice(9)).toEqual([429, 429, 429]);
    });

    it('publishes, reads and deletes entries for operators', async () => {
      const pub = await request(t.httpUrl)
        .post('/admin/registry/op-1')
        .set(auth)
        .send({ part_idx: 3, metadata: META });
      expect(pub.status).toBe(200);
      expect(pub.body).toEqual({ req_id: 'op-1', published: true });

      const got = await request(t.httpUrl).get('/admin/registry/op-1').set(auth);
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ req_id: 'op-1', part_idx: 3, metadata: META });
      expect(got.body.age_ms).toBeGreaterThanOrEqual(0);

      const stats = await request(t.httpUrl).get('/admin/registry').set(auth);
      expect(stats.body).toMatchObject({ entries: 1, waiters: 0, counters: { publishes: 1 } });
      expect(stats.body.oldestAgeMs).toBeGreaterThanOrEqual(0);

      expect((await request(t.httpUrl).delete('/admin/registry/op-1').set(auth)).status).toBe(200);
      const again = await request(t.httpUrl).delete('/admin/registry/op-1').set(auth);
      expect(again.status).toBe(404);
      expect(again.body).toEqual({
        status: 'error',
        code: 404,
        type: 'unknown_req_id',
        message: 'Unknown req_id: op-1',
        req_id: 'op-1',
      });
      expect((await request(t.httpUrl).get('/admin/registry/op-1').set(auth)).status).toBe(404);
    });

    it('rejects a bad publish body with a 400 that names the field', async () => {
      const res = await request(t.httpUrl)
        .post('/admin/registry/op-2')
        .set(auth)
        .send({ metadata: { embedding_dim: 0 } });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^invalid publish body: metadata/);
    });

    it('wakes an HTTP waiter on /scheduler_receive_meta_data when an operator publishes', async () => {
      const waiting = request(t.httpUrl)
        .post('/scheduler_receive_meta_data')
        .send({ req_id: 'op-3', part_idx: 0 });
      const pending = waiting.then((r) => r);
      // Publish only once the HTTP waiter is registered (not after a guessed sleep).
      expect(await waitFor(async () => (await t.registry.stats()).waiters === 1)).toBe(true);
      await request(t.httpUrl).post('/admin/registry/op-3').set(auth).send({ metadata: META });
      const res = await pending;
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...META, req_id: 'op-3', part_idx: 0 });
    });

    it('frees the wait of an HTTP client that disconnects', async () => {
      const req = request(t.httpUrl)
        .post('/scheduler_receive_meta_data')
        .timeout(200)
        .send({ req_id: 'gone' });
      await expect(req).rejects.toThrow();
      await waitFor(async () => (await t.registry.stats()).waiters === 0, 2000);
      const s = await t.registry.stats();
      expect(s.waiters).toBe(0);
      expect(s.counters.cancelled).toBeGreaterThanOrEqual(1);
    });

    it('keeps health and docs public', async () => {
      expect((await request(t.httpUrl).get('/health/live')).status).toBe(200);
      expect((await request(t.httpUrl).get('/docs-json')).status).toBe(200);
    });
  });

  describe('with EPD_METRICS_REQUIRE_TOKEN=true', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({
        EPD_ADMIN_TOKEN: 'scrape-me-0123456789abcdef0123456789ab',
        EPD_METRICS_REQUIRE_TOKEN: 'true',
      });
    });
    afterAll(() => t.close());

    it('guards /metrics with the admin token', async () => {
      const denied = await request(t.httpUrl).get('/metrics');
      expect(denied.status).toBe(401);
      expect(denied.body).toMatchObject({ code: 401, type: 'unauthorized' });
      const ok = await request(t.httpUrl)
        .get('/metrics')
        .set({ Authorization: 'Bearer scrape-me-0123456789abcdef0123456789ab' });
      expect(ok.status).toBe(200);
      expect(ok.text).toMatch(/epd_encoder_nats_queue_depth/);
    });
  });

  describe('without a token', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp();
    });
    afterAll(() => t.close());

    it('serves admin routes openly', async () => {
      expect((await request(t.httpUrl).get('/admin/registry')).status).toBe(200);
    });

    it('lists its threads by operating-system id, for per-thread CPU accounting (schedstat)', async () => {
      type Threads = { main: number; preprocessing: number[]; inference: number[] };
      const threads = async () =>
        (
          (await request(t.httpUrl).get('/admin/workers')).body as {
            workers: { threads: Threads }[];
          }
        ).workers[0]!.threads;
      // The worker threads announce themselves once their modules have loaded.
      const want = t.config.encoder.preprocessThreads;
      await waitFor(async () => {
        const th = await threads();
        return th.preprocessing.length === want && th.inference.length === 1;
      }, 20_000);
      const th = await threads();
      expect(th.main).toBe(process.pid); // this app runs in the test's process
      expect(th.preprocessing).toHaveLength(want);
      expect(th.inference).toHaveLength(1);
      const all = [th.main, ...th.preprocessing, ...th.inference];
      expect(new Set(all).size).toBe(all.length);
      for (const tid of all) expect(existsSync(`/proc/${process.pid}/task/${tid}`)).toBe(true);
    });

    it('answers 504 on /scheduler_receive_meta_data with the SGLang error body', async () => {
      const res = await request(t.httpUrl)
        .post('/scheduler_receive_meta_data')
        .send({ req_id: 'nope', timeout_ms: 100 });
      expect(res.status).toBe(504);
      expect(res.body).toEqual({
        status: 'error',
        code: 504,
        type: 'metadata_not_ready',
        message: 'encode metadata not ready',
        req_id: 'nope',
      });
    });

    it('documents the routes in OpenAPI, with schemas from zod', async () => {
      const res = await request(t.httpUrl).get('/docs-json');
      const doc = res.body as {
        paths: Record<
          string,
          Record<
            string,
            { requestBody?: { content: Record<string, { schema: { properties?: object } }> } }
          >
        >;
      };
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining([
          '/admin/registry',
          '/admin/registry/{req_id}',
          '/scheduler_receive_meta_data',
          '/health',
        ]),
      );
      const body =
        doc.paths['/scheduler_receive_meta_data']!.post!.requestBody!.content['application/json']!
          .schema;
      expect(body.properties).toHaveProperty('req_id');
      expect(body.properties).toHaveProperty('timeout_ms');
      // Responses are documented too: the reply and the error body, from their zod schemas.
      type Responses = Record<
        string,
        { content: Record<string, { schema: { properties: object } }> }
      >;
      const replies = (path: string) =>
        (doc.paths[path]!.post as unknown as { responses: Responses }).responses;
      const schemaOf = (path: string, status: string) =>
        replies(path)[status]!.content['application/json']!.schema.properties;
      expect(schemaOf('/encode', '200')).toHaveProperty('embedding_len');
      expect(schemaOf('/encode', '200')).toHaveProperty('timings');
      expect(schemaOf('/encode', '507')).toHaveProperty('type');
      expect(schemaOf('/scheduler_receive_meta_data', '200')).toHaveProperty('embedding_size');
      expect(schemaOf('/scheduler_receive_meta_data', '504')).toHaveProperty('type');
      expect(schemaOf('/send', '200')).toHaveProperty('acked');
    });

    it('exposes registry metrics in Prometheus format', async () => {
      await request(t.httpUrl).post('/admin/registry/m1').send({ metadata: META });
      const res = await request(t.httpUrl).get('/metrics');
      expect(res.status).toBe(200);
      expect(res.text).toMatch(/^epd_encoder_registry_entries 1$/m);
      expect(res.text).toMatch(/^epd_encoder_registry_events_total{event="publish"} 1$/m);
      expect(res.text).toMatch(/^epd_encoder_registry_waiters 0$/m);
    });

    it('answers unknown routes with a 404 error body', async () => {
      const res = await request(t.httpUrl).get('/nope');
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ status: 'error', code: 404 });
    });
  });
});
