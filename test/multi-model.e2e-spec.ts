import { connect, type NatsConnection } from '@nats-io/transport-node';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { projectRoot } from '../src/common/fs/project-root';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor, type Reply } from './support/calls';
import { dataUri, image, tone } from './support/media';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const QWEN2 = join(projectRoot(), 'models', 'qwen2-vl-2b-reference');
const QWEN3 = join(projectRoot(), 'models', 'qwen3-vl-4b-reference');
/** The second model's name as configured: the checkpoint id vLLM callers send. */
const Q3 = 'Qwen/Qwen3-VL-4B-Instruct';
const VLLM_ID = 'Qwen/Qwen2-VL-2B-Instruct';

/**
 * Several models in one process (EPD_MODEL_DIR=dir,name=dir): each request chooses one by
 * `model` (the default when absent, so SGLang callers change nothing), over NATS, HTTP and
 * vLLM's face; each answers with its own grid and width; an unknown name is a 400 listing
 * the served ones. The built service, with the generated Qwen2-VL-2B and Qwen3-VL-4B
 * reference directories.
 */
describe('several models in one process (e2e)', () => {
  const prefix = uniquePrefix();
  let svc: ServiceProcess;
  let nc: NatsConnection;

  beforeAll(async () => {
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_MODEL_DIR: `${QWEN2},${Q3}=${QWEN3}`,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_VLLM_EC_PATH: mkdtempSync(join(tmpdir(), 'epd-mm-ec-')),
      EPD_VLLM_MODEL_ID: VLLM_ID,
      // Each model may hold 5% of the 1 GiB working-memory budget (53,687,091 bytes).
      EPD_MODEL_WORK_SHARE: '0.05',
    });
    nc = await connect({ servers: sharedNatsUrl() });
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await svc?.stop();
  });

  const call = async (dp: string, body: object): Promise<Reply> =>
    (await nc.request(`${prefix}.v1.${dp}`, JSON.stringify(body), { timeout: 30_000 })).json();
  const png = async (w: number, h: number) => dataUri(await image(w, h, 'png'), 'image/png');

  it('lists both models, the default first, each with its own preprocessing', async () => {
    const admin = (await request(svc.url).get('/admin/encoder')).body as {
      models: { kind: string; name: string; family: string }[];
      preprocessing: { per_model: unknown[] };
    };
    expect(
      admin.models.map((m: { kind: string; name: string; family: string }) => [
        m.kind,
        m.name,
        m.family,
      ]),
    ).toEqual([
      ['vision', 'qwen2-vl-2b-reference', 'qwen2-vl'],
      ['vision', Q3, 'qwen3-vl'],
    ]);
    expect(admin.preprocessing.per_model).toEqual([
      expect.objectContaining({ name: 'qwen2-vl-2b-reference', patch_size: 14, min_pixels: 3136 }),
      expect.objectContaining({ name: Q3, patch_size: 16, min_pixels: 65536 }),
    ]);
    const health = (await request(svc.url).get('/health')).body;
    expect(health.details.encoder.models).toHaveLength(2);
  });

  it('answers each model by name with its own grid and width; without a name, the default (SGLang /encode unchanged)', async () => {
    const item = await png(448, 448);
    // The default: Qwen2-VL, 14-pixel patches: 32×32 patches, 256 tokens of 1536.
    const plain = await request(svc.url)
      .post('/encode')
      .send(encodeBody('mm-default', [item]));
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({ embedding_len: 256, embedding_dim: 1536 });
    // Qwen3-VL by name, over HTTP: 16-pixel patches, 28×28, 196 tokens of 2560 × 4.
    const q3 = await request(svc.url)
      .post('/encode')
      .send({ ...encodeBody('mm-q3', [item]), model: Q3 });
    expect(q3.status).toBe(200);
    expect(q3.body).toMatchObject({ embedding_len: 196, embedding_dim: 10240 });
    // And over NATS, where the metadata a receiver waits for carries the same width.
    const viaNats = await call('encode', { ...encodeBody('mm-q3-nats', [item]), model: Q3 });
    expect(viaNats.response).toMatchObject({ embedding_len: 196, embedding_dim: 10240 });
    const meta = await call('wait_metadata', { req_id: 'mm-q3-nats', timeout_ms: 5000 });
    expect(meta.response).toMatchObject({ embedding_len: 196, embedding_dim: 10240 });
    // The same bytes on the other model again: no entry of one model answers the other.
    const again = await call('encode', { ...encodeBody('mm-default-2', [item]) });
    expect(again.response).toMatchObject({ embedding_len: 256, embedding_dim: 1536 });
    // Each model its own label (requests that name none count for the default).
    const metrics = (await request(svc.url).get('/metrics')).text;
    expect(metrics).toContain(
      `epd_encoder_model_requests_total{model="${Q3}",modality="image",status="success"} 2`,
    );
    expect(metrics).toContain(
      'epd_encoder_model_requests_total{model="qwen2-vl-2b-reference",modality="image",status="success"} 2',
    );
    for (const id of ['mm-default', 'mm-q3', 'mm-q3-nats', 'mm-default-2'])
      expect((await call('release', { req_id: id })).err).toBeUndefined();
  });

  it('an unknown model is a 400 that lists the served ones; audio is the default model tower', async () => {
    const item = await png(64, 64);
    const res = await request(svc.url)
      .post('/encode')
      .send({ ...encodeBody('mm-unknown', [item]), model: 'llava' });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe(
      `unknown model "llava": this encoder serves "qwen2-vl-2b-reference", "${Q3}" (the first is the default)`,
    );
    const viaNats = await call('encode', { ...encodeBody('mm-unknown-2', [item]), model: 'x' });
    expect(viaNats.err).toMatchObject({ code: 400, type: 'invalid_request' });
    const audio = await request(svc.url)
      .post('/encode')
      .send({ ...encodeBody('mm-audio', [dataUri(tone(0.5), 'audio/wav')], 'audio'), model: Q3 });
    expect(audio.status).toBe(400);
    expect(audio.body.message).toContain(`model "${Q3}" serves no audio`);
    // Qwen3-VL video, by name: its video processor's bounds (video_preprocessor_config.json)
    // size the grid; two 64×64 frames are one temporal patch of 4×4 patches, 4 tokens.
    const frames = [await image(64, 64, 'png'), await image(64, 64, 'png')].map((b) =>
      dataUri(b, 'image/png'),
    );
    const video = await request(svc.url)
      .post('/encode')
      .send({ ...encodeBody('mm-video-q3', frames, 'video'), model: Q3 });
    expect(video.status).toBe(200);
    expect(video.body).toMatchObject({ embedding_len: 4, embedding_dim: 10240 });
    expect((await call('release', { req_id: 'mm-video-q3' })).err).toBeUndefined();
    const videoDefault = await request(svc.url)
      .post('/encode')
      .send(encodeBody('mm-video-q2', frames, 'video'));
    expect(videoDefault.status).toBe(200);
    expect((await call('release', { req_id: 'mm-video-q2' })).err).toBeUndefined();
    // Nothing was begun for them: the ids are free.
    const states = (await request(svc.url).get('/admin/requests')).body as {
      requests: { req_id: string }[];
    };
    expect(states.requests.map((r: { req_id: string }) => r.req_id)).not.toContain('mm-unknown');
  });

  it('`epd status` shows every model with its encodes', async () => {
    const env = {
      ...process.env,
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_HTTP_PORT: new URL(svc.url).port,
    };
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [join(projectRoot(), 'dist', 'cli', 'epd.js'), 'status'],
        { env, timeout: 30_000 },
        (err, stdout) => (err ? reject(new Error(err.message)) : resolve(stdout)),
      ),
    );
    expect(out).toMatch(/^model\s+family\s+stand-in\s+encodes ok \/ error \/ rejected$/m);
    expect(out).toMatch(/^qwen2-vl-2b-reference\s+qwen2-vl\s+yes\s+\d+ \/ 0 \/ 0$/m);
    // Qwen3-VL's: its two images and its video, by name.
    expect(out).toMatch(
      new RegExp(`^${Q3.replace(/[./-]/g, '\\$&')}\\s+qwen3-vl\\s+yes\\s+3 / 0 / 0$`, 'm'),
    );
  });

  it('each model holds at most its share of working memory (EPD_MODEL_WORK_SHARE): a part over it is a 507 naming the model, and the shares drain to zero', async () => {
    // 1400×1600 on the default model (its directory's 12.8 M pixel bound keeps 1400×1596):
    // 100 × 114 patches of 1176 float32 plus the decoded pixels, about 60 MB: within the
    // 1 GiB budget, over the model's share.
    const res = await request(svc.url)
      .post('/encode')
      .send(encodeBody('mm-share', [await png(1400, 1600)]));
    expect(res.status).toBe(507);
    expect(res.body.message).toMatch(
      /^request needs \d+ bytes of working memory, more than model "qwen2-vl-2b-reference"'s share of 53687091 \(EPD_MODEL_WORK_SHARE of EPD_WORK_MAX_BYTES\)$/,
    );
    // The same image to the other model (16-pixel patches, under its share) is served.
    const other = await request(svc.url)
      .post('/encode')
      .send({ ...encodeBody('mm-share-q3', [await png(700, 800)]), model: Q3 });
    expect(other.status).toBe(200);
    expect((await call('release', { req_id: 'mm-share-q3' })).err).toBeUndefined();
    const memory = (await request(svc.url).get('/admin/encoder')).body.memory as {
      model_share_bytes: number;
      per_model: Record<string, number>;
    };
    expect(memory.model_share_bytes).toBe(53687091);
    expect(memory.per_model).toEqual({ 'qwen2-vl-2b-reference': 0, [Q3]: 0 });
  });

  it("vLLM's face: the chat's model chooses the tower (EPD_VLLM_MODEL_ID is the default's), the grid follows it", async () => {
    const item = await png(448, 448);
    const chat = (model: string, uuid: string) =>
      request(svc.url)
        .post('/v1/chat/completions')
        .send({
          model,
          messages: [
            { role: 'user', content: [{ type: 'image_url', image_url: { url: item }, uuid }] },
          ],
        });
    const byDefault = await chat(VLLM_ID, 'mm-v-default');
    expect(byDefault.status).toBe(200);
    expect(JSON.stringify(byDefault.body)).toContain('"image_grid_thw":[1,32,32]');
    const byName = await chat(Q3, 'mm-v-q3');
    expect(byName.status).toBe(200);
    expect(JSON.stringify(byName.body)).toContain('"image_grid_thw":[1,28,28]');
    const unknown = await chat('llava', 'mm-v-x');
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain('unknown model "llava"');
  });
});

describe('several models in each DP worker (e2e, EPD_DP_SIZE=2)', () => {
  let svc: ServiceProcess;
  /** GET /admin/workers as read right after /health/ready first answered 200. */
  let atReady: { alive: number; dp_size: number };
  /** The conditions /health/ready named while it answered 503. */
  const waitedFor = new Set<string>();
  beforeAll(async () => {
    // Live, not ready: the test watches the turn to ready itself, every 5 ms.
    svc = await startServiceProcess(
      {
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_SUBJECT_PREFIX: uniquePrefix(),
        EPD_DP_SIZE: '2',
        EPD_MODEL_DIR: `${QWEN2},${Q3}=${QWEN3}`,
        EPD_ALLOW_REFERENCE_MODEL: 'true',
      },
      '/health/live',
    );
    await waitFor(
      async () => {
        const ready = await fetch(`${svc.url}/health/ready`);
        const body = (await ready.json()) as {
          details?: { serving?: { waiting_for?: object } };
        };
        for (const name of Object.keys(body.details?.serving?.waiting_for ?? {})) {
          waitedFor.add(name);
        }
        return ready.status === 200;
      },
      30_000,
      5,
    );
    atReady = (await (await fetch(`${svc.url}/admin/workers`)).json()) as typeof atReady;
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  it('turns ready only once every worker has started (a new instance serves at full width)', () => {
    expect(atReady).toMatchObject({ dp_size: 2, alive: 2 });
    expect([...waitedFor]).toContain('DP workers');
  });

  it('each worker answers both models by name; the supervisor lists them and passes the 400 on', async () => {
    const item = dataUri(await image(448, 448, 'png'), 'image/png');
    const encode = (reqId: string, model?: string) =>
      request(svc.url)
        .post('/encode')
        .send({ ...encodeBody(reqId, [item]), ...(model ? { model } : {}) });
    // Four calls, so that both ranks take some (the supervisor spreads by load).
    const answers = await Promise.all([
      encode('dp-d1'),
      encode('dp-q1', Q3),
      encode('dp-d2'),
      encode('dp-q2', Q3),
    ]);
    expect(
      answers.map((r) => [r.status, (r.body as { embedding_dim: number }).embedding_dim]),
    ).toEqual([
      [200, 1536],
      [200, 10240],
      [200, 1536],
      [200, 10240],
    ]);
    const unknown = await encode('dp-x', 'llava');
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain('unknown model "llava"');
    const admin = (await request(svc.url).get('/admin/encoder')).body as {
      models: { name: string; patch_size: number }[];
      ranks: unknown[];
      missing: unknown[];
    };
    expect(admin.models.map((m) => [m.name, m.patch_size])).toEqual([
      ['qwen2-vl-2b-reference', 14],
      [Q3, 16],
    ]);
    expect(admin.ranks).toHaveLength(2);
    expect(admin.missing).toEqual([]);
  });
});
