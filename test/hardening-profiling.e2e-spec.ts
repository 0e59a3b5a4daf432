import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { ProfilerService } from '../src/profiling/profiler.service';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { natsCall } from './support/calls';

/**
 * Regression tests for "Hardening first", defects 1 (profiling leaks V8 sessions) and 6
 * (profile output_dir confinement leaks), with the adversarial probe's inputs.
 */
describe('profiling hardening (e2e)', () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(() => nc.drain());

  const privateDir = () => mkdtempSync(join(tmpdir(), 'epd-prof-root-'));

  describe('profiling-session-leak', () => {
    let t: TestApp;
    let root: string;
    beforeAll(async () => {
      root = privateDir();
      t = await startTestApp({ EPD_PROFILE_ROOT: root });
    });
    afterAll(() => t.close());

    it('20 concurrent start_profile calls (HTTP POST, GET and NATS) start exactly one session, ten rounds over', async () => {
      const profiler = t.app.get(ProfilerService);
      for (let round = 0; round < 10; round++) {
        const starts = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            i % 3 === 0
              ? request(t.httpUrl)
                  .post('/start_profile')
                  .send({ profile_prefix: `r${round}` })
                  .then((r) => r.status)
              : i % 3 === 1
                ? request(t.httpUrl)
                    .get('/start_profile')
                    .then((r) => r.status)
                : natsCall(nc, t, 'start_profile', { profile_prefix: `r${round}` }).then((r) =>
                    r.response?.ok ? 200 : (r.err?.code ?? 0),
                  ),
          ),
        );
        expect(starts.filter((s) => s === 200)).toHaveLength(1);
        expect(starts.filter((s) => s === 400)).toHaveLength(19);
        expect(profiler.sessions).toBe(1);
        expect((await request(t.httpUrl).post('/stop_profile')).status).toBe(200);
        expect(profiler.sessions).toBe(0);
        expect(profiler.running).toBe(false);
      }
      // One file per round: every session that started was also stopped and written.
      expect(readdirSync(root).filter((f) => f.endsWith('.cpuprofile'))).toHaveLength(10);
    });

    it('concurrent stops end the one session once: one 200, the others 400 "profiling not running"', async () => {
      expect((await natsCall(nc, t, 'start_profile', {})).response?.ok).toBe(true);
      const stops = await Promise.all(
        Array.from({ length: 5 }, () => request(t.httpUrl).post('/stop_profile')),
      );
      expect(stops.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400]);
      expect(t.app.get(ProfilerService).sessions).toBe(0);
      // A new profile can start once the previous one is written.
      expect((await natsCall(nc, t, 'start_profile', {})).response?.ok).toBe(true);
      expect((await natsCall(nc, t, 'stop_profile', {})).response?.ok).toBe(true);
    });
  });

  it('profiling-session-leak: shutdown ends a running profile and writes it', async () => {
    const dir = privateDir();
    const app = await startTestApp({ EPD_PROFILE_ROOT: dir });
    expect((await request(app.httpUrl).post('/start_profile').send({})).status).toBe(200);
    await app.close();
    expect(app.app.get(ProfilerService).sessions).toBe(0);
    expect(readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))).toHaveLength(1);
  });

  describe('profile-routes-need-admin-token', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({
        EPD_PROFILE_ROOT: privateDir(),
        EPD_ADMIN_TOKEN: 's3cret-0123456789abcdef0123456789abcdef',
      });
    });
    afterAll(() => t.close());

    it('refuses HTTP start/stop (GET and POST) without the token, and accepts them with it', async () => {
      for (const [method, path] of [
        ['get', '/start_profile'],
        ['post', '/start_profile'],
        ['get', '/stop_profile'],
        ['post', '/stop_profile'],
      ] as const) {
        const r = await request(t.httpUrl)[method](path);
        expect(r.status).toBe(401);
        expect(r.body).toMatchObject({ message: 'missing or invalid admin bearer token' });
      }
      const auth = { Authorization: 'Bearer s3cret-0123456789abcdef0123456789abcdef' };
      expect((await request(t.httpUrl).post('/start_profile').set(auth).send({})).status).toBe(200);
      expect((await request(t.httpUrl).get('/stop_profile').set(auth)).status).toBe(200);
    });

    it('refuses NATS start/stop without the Authorization header, and accepts them with it', async () => {
      expect((await natsCall(nc, t, 'start_profile', {})).err).toMatchObject({ code: 401 });
      expect((await natsCall(nc, t, 'stop_profile', {})).err).toMatchObject({ code: 401 });
      const headers = { Authorization: 'Bearer wrong' };
      expect((await natsCall(nc, t, 'start_profile', {}, { headers })).err).toMatchObject({
        code: 401,
      });
      const ok = { headers: { Authorization: 'Bearer s3cret-0123456789abcdef0123456789abcdef' } };
      expect((await natsCall(nc, t, 'start_profile', {}, ok)).response?.ok).toBe(true);
      expect((await natsCall(nc, t, 'stop_profile', {}, ok)).response?.ok).toBe(true);
    });
  });

  describe('profile-output-dir-confinement', () => {
    let t: TestApp;
    let root: string;
    let outside: string;
    beforeAll(async () => {
      root = privateDir();
      outside = privateDir();
      t = await startTestApp({ EPD_PROFILE_ROOT: root });
    });
    afterAll(() => t.close());

    it('evil_link/x: a symlink below the root is refused before anything is created outside', async () => {
      symlinkSync(outside, join(root, 'evil_link'));
      const r = await natsCall(nc, t, 'start_profile', { output_dir: 'evil_link/x' });
      expect(r.err).toMatchObject({ code: 400, message: expect.stringContaining('symlink') });
      expect(existsSync(join(outside, 'x'))).toBe(false);
      const abs = await natsCall(nc, t, 'start_profile', { output_dir: join(root, 'evil_link') });
      expect(abs.err).toMatchObject({ code: 400 });
      expect(t.app.get(ProfilerService).running).toBe(false);
    });

    it('a directory swapped for a symlink between start and stop does not receive the profile', async () => {
      mkdirSync(join(root, 'swap'));
      expect((await natsCall(nc, t, 'start_profile', { output_dir: 'swap' })).response?.ok).toBe(
        true,
      );
      renameSync(join(root, 'swap'), join(root, 'swap.old'));
      symlinkSync(outside, join(root, 'swap'));
      const stop = await natsCall(nc, t, 'stop_profile', {});
      expect(stop.err).toMatchObject({ code: 400, message: expect.stringContaining('symlink') });
      expect(readdirSync(outside)).toEqual([]);
      expect(t.app.get(ProfilerService).sessions).toBe(0);
    });

    it('paths outside the root, with NUL, or with a component over 255 bytes get 400, not 500', async () => {
      for (const output_dir of ['/etc', '../..', 'a\0b', 'x'.repeat(256), `${'y/'.repeat(2100)}`]) {
        const r = await natsCall(nc, t, 'start_profile', { output_dir });
        expect(r.err).toMatchObject({ code: 400 });
        const h = await request(t.httpUrl).post('/start_profile').send({ output_dir });
        expect(h.status).toBe(400);
      }
      expect(t.app.get(ProfilerService).running).toBe(false);
    });
  });

  it('profile-default-root-is-private: without EPD_PROFILE_ROOT, profiles go to a 0700 per-user state dir', async () => {
    const state = privateDir();
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = state;
    const t = await startTestApp({ EPD_PROFILE_ROOT: '' });
    try {
      const r = await natsCall(nc, t, 'start_profile', {});
      const dir = join(state, 'epd-encoder', 'profiles');
      expect(r.response?.msg).toContain(`output_dir=${dir} `);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect((await natsCall(nc, t, 'stop_profile', {})).response?.ok).toBe(true);
    } finally {
      await t.close();
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });
});
