import { connect } from '@nats-io/transport-node';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { projectRoot } from '../src/common/fs/project-root';
import { dataUri, image, tone } from './support/media';
import { sharedNatsUrl } from './support/shared-nats';
import { uniquePrefix } from './support/app';
import { writeUnmarkedModel } from './support/unmarked-model';
import {
  runServiceToExit,
  startServiceProcess,
  type ServiceProcess,
} from './support/service-process';

/**
 * A model is a directory (EPD_MODEL_DIR): the ONNX tower beside the checkpoint's own
 * preprocessor_config.json and config.json, which decide min/max pixels and the width the
 * tower must output; what the family needs that is missing, contradictory or not ours stops
 * the start (exit 78) naming the file and the key. Run against the built service with the
 * generated reference directory of Qwen2-VL-2B (npm run models).
 */
const REFERENCE = join(projectRoot(), 'models', 'qwen2-vl-2b-reference');
/** Qwen3-VL-4B-Instruct's layout: 16-pixel patches, mean/std 0.5, DeepStack width 2560 × 4. */
const QWEN3_VL = join(projectRoot(), 'models', 'qwen3-vl-4b-reference');

/** InternVL3-1B-hf's layout: 448-pixel tiles (1 to 12, a thumbnail), 256 tokens a tile, width 896. */
const INTERNVL = join(projectRoot(), 'models', 'internvl3-1b-reference');

/** A safetensors file's one tensor: its header entry and its bytes. */
function readTensor(file: string): { dtype: string; shape: number[]; data: Buffer } {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[] }
  >;
  return { ...header.ec_cache!, data: buf.subarray(8 + n) };
}

type Edit = (json: Record<string, unknown>) => void;

/** `edit` applied to one of `dir`'s JSON files. */
function edited(dir: string, file: string, edit: Edit): string {
  const path = join(dir, file);
  const json = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(json);
  writeFileSync(path, JSON.stringify(json));
  return dir;
}

/** A copy of the reference directory with `edit` applied to one of its JSON files. */
function variant(file: string, edit: Edit): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'epd-modeldir-')), 'model');
  cpSync(REFERENCE, dir, { recursive: true });
  return edited(dir, file, edit);
}

describe('EPD_MODEL_DIR (e2e, the built service)', () => {
  let svc: ServiceProcess | undefined;
  afterEach(async () => {
    await svc?.stop();
    svc = undefined;
  });

  it("serves the directory's tower with its checkpoint's min/max pixels and width, and names it", async () => {
    svc = await startServiceProcess({
      EPD_MODEL_DIR: REFERENCE,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const admin = (await request(svc.url).get('/admin/encoder')).body;
    expect(admin.preprocessing).toMatchObject({
      min_pixels: 3136,
      max_pixels: 12845056, // preprocessor_config.json's, not EPD_MAX_PIXELS' default
      patch_size: 14,
      merge_size: 2,
      model_dir: REFERENCE,
    });
    expect(admin.models[0]).toMatchObject({
      kind: 'vision',
      name: 'qwen2-vl-2b-reference',
      family: 'qwen2-vl',
      reference: true,
    });
    // A 1288×1288 image (1,658,944 pixels): within the checkpoint's max_pixels, so not scaled
    // down to the default cap (1,003,520, which gives 70×70 patches): 92×92 patches, 2116
    // tokens of width 1536 (config.json's).
    const png = await image(1288, 1288, 'png');
    const res = await request(svc.url)
      .post('/encode')
      .send({
        req_id: 'dir-1',
        modality: 'image',
        num_parts: 1,
        part_idx: 0,
        mm_items: [dataUri(png, 'image/png')],
      });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ embedding_len: 2116, embedding_dim: 1536 });
    // The directory has no audio tower: this process serves no audio.
    expect(admin.models).toHaveLength(1);
    const audio = await request(svc.url)
      .post('/encode')
      .send({
        req_id: 'dir-audio',
        modality: 'audio',
        num_parts: 1,
        part_idx: 0,
        mm_items: [dataUri(tone(0.5), 'audio/wav')],
      });
    expect(audio.status).toBe(400);
    expect(audio.body.message).toContain('this encoder serves no audio model');
  });

  it("serves a Qwen3-VL directory: 16-pixel patches, its checkpoint's pixel bounds, DeepStack's width, over /encode and vLLM's face", async () => {
    const ecPath = mkdtempSync(join(tmpdir(), 'epd-q3-ec-'));
    svc = await startServiceProcess({
      EPD_MODEL_DIR: QWEN3_VL,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_VLLM_EC_PATH: ecPath,
      EPD_VLLM_MODEL_ID: 'Qwen/Qwen3-VL-4B-Instruct',
    });
    const admin = (await request(svc.url).get('/admin/encoder')).body;
    expect(admin.preprocessing).toMatchObject({
      patch_size: 16,
      merge_size: 2,
      temporal_patch_size: 2,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      min_pixels: 65536, // size.shortest_edge
      max_pixels: 16777216, // size.longest_edge
    });
    expect(admin.models[0]).toMatchObject({
      name: 'qwen3-vl-4b-reference',
      family: 'qwen3-vl',
      reference: true,
    });
    // 640×480: multiples of 32 already, so 40×30 patches of 16 pixels, 300 tokens; each row
    // out_hidden_size 2560 × (1 + 3 DeepStack layers) = 10,240 wide.
    const png = await image(640, 480, 'png');
    const res = await request(svc.url)
      .post('/encode')
      .send({
        req_id: 'q3-1',
        modality: 'image',
        num_parts: 1,
        part_idx: 0,
        mm_items: [dataUri(png, 'image/png')],
      });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      embedding_len: 300,
      embedding_dim: 10240,
      embedding_size: 300 * 10240 * 4,
    });
    // 100×100 is under the checkpoint's 65,536 pixels: grown to 256×256, 16×16 patches, 64 tokens.
    const small = await request(svc.url)
      .post('/encode')
      .send({
        req_id: 'q3-2',
        modality: 'image',
        num_parts: 1,
        part_idx: 0,
        mm_items: [dataUri(await image(100, 100, 'png'), 'image/png')],
      });
    expect(small.body).toMatchObject({ embedding_len: 64, embedding_dim: 10240 });
    // vLLM's face reports the grid in 16-pixel patches, and its row count checks against it.
    const chat = await request(svc.url)
      .post('/v1/chat/completions')
      .send({
        model: 'Qwen/Qwen3-VL-4B-Instruct',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: dataUri(png, 'image/png') }, uuid: 'q3-v' },
            ],
          },
        ],
      });
    expect(chat.status).toBe(200);
    expect(JSON.stringify(chat.body)).toContain('"image_grid_thw":[1,30,40]');
  });

  it("serves an InternVL directory: 448-pixel tiles with a thumbnail, 256 tokens a tile, the projector's width, over /encode, NATS and vLLM's face, beside a Qwen2-VL model", async () => {
    const ecPath = mkdtempSync(join(tmpdir(), 'epd-ivl-ec-'));
    const prefix = uniquePrefix();
    // A copy without its video processor's file: it serves images and refuses video.
    const noVideo = join(mkdtempSync(join(tmpdir(), 'epd-modeldir-')), 'ivl');
    cpSync(INTERNVL, noVideo, { recursive: true });
    rmSync(join(noVideo, 'video_preprocessor_config.json'));
    svc = await startServiceProcess({
      EPD_SUBJECT_PREFIX: prefix,
      EPD_MODEL_DIR: `${INTERNVL},${REFERENCE},ivl-no-video=${noVideo}`,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_VLLM_EC_PATH: ecPath,
      EPD_VLLM_MODEL_ID: 'OpenGVLab/InternVL3-1B-hf',
    });
    const admin = (await request(svc.url).get('/admin/encoder')).body as {
      models: { name: string; family: string }[];
      preprocessing: { per_model: object[] };
    };
    expect(admin.models.map((m) => [m.name, m.family])).toEqual([
      ['internvl3-1b-reference', 'internvl'],
      ['qwen2-vl-2b-reference', 'qwen2-vl'],
      ['ivl-no-video', 'internvl'],
    ]);
    expect(admin.preprocessing.per_model[0]).toMatchObject({
      patch_size: 14,
      merge_size: 2,
      image_mean: [0.485, 0.456, 0.406],
      tiling: {
        tile_size: 448,
        min_tiles: 1,
        max_tiles: 12,
        thumbnail: true,
        tokens_per_tile: 256,
      },
    });
    // 1024×768 is 4:3: 4 × 3 tiles and the thumbnail, 13 × 256 = 3328 tokens of 896.
    const png = await image(1024, 768, 'png');
    const body = (id: string, items = [dataUri(png, 'image/png')], modality = 'image') => ({
      req_id: id,
      modality,
      num_parts: 1,
      part_idx: 0,
      mm_items: items,
    });
    const res = await request(svc.url).post('/encode').send(body('ivl-1'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      embedding_len: 3328,
      embedding_dim: 896,
      embedding_size: 3328 * 896 * 4,
    });
    // Over NATS, the metadata a receiver waits for says the same before it allocates.
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      const call = async (dp: string, data: object) =>
        (await nc.request(`${prefix}.v1.${dp}`, JSON.stringify(data), { timeout: 30_000 })).json<{
          response?: object;
          err?: object;
        }>();
      expect((await call('encode', body('ivl-n'))).response).toMatchObject({
        embedding_len: 3328,
        embedding_dim: 896,
      });
      expect(
        (await call('wait_metadata', { req_id: 'ivl-n', timeout_ms: 5000 })).response,
      ).toMatchObject({ embedding_len: 3328, embedding_dim: 896, embedding_size: 3328 * 896 * 4 });
      expect((await call('release', { req_id: 'ivl-n' })).err).toBeUndefined();
    } finally {
      await nc.close();
    }
    // A square 448² image is one tile, no thumbnail; the Qwen2-VL model by name beside it.
    const square = dataUri(await image(448, 448, 'png'), 'image/png');
    const one = await request(svc.url)
      .post('/encode')
      .send(body('ivl-2', [square]));
    expect(one.body).toMatchObject({ embedding_len: 256, embedding_dim: 896 });
    const qwen = await request(svc.url)
      .post('/encode')
      .send({ ...body('ivl-q2', [square]), model: 'qwen2-vl-2b-reference' });
    expect(qwen.body).toMatchObject({ embedding_len: 256, embedding_dim: 1536 });
    // Video: one 448 tile a frame (its video processor's file), 256 tokens each; without
    // that file, a 400 that names it, before anything is loaded.
    const video = await request(svc.url)
      .post('/encode')
      .send(body('ivl-v', [square, square], 'video'));
    expect(video.status).toBe(200);
    expect(video.body).toMatchObject({ embedding_len: 512, embedding_dim: 896 });
    const refused = await request(svc.url)
      .post('/encode')
      .send({ ...body('ivl-v2', [square, square], 'video'), model: 'ivl-no-video' });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain(
      'model "ivl-no-video" (internvl) takes no video here yet: its directory has no video_preprocessor_config.json',
    );
    // vLLM's face: the grid as [tiles, 32, 32] (tokens = t·h·w / 4, as for every model) and
    // the file's rows (the staging dtype, float32 by default), bit for bit the CLI's forward
    // of the same image.
    const chat = await request(svc.url)
      .post('/v1/chat/completions')
      .send({
        model: 'OpenGVLab/InternVL3-1B-hf',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: dataUri(png, 'image/png') }, uuid: 'ivl-v1' },
            ],
          },
        ],
      });
    expect(chat.status).toBe(200);
    expect(JSON.stringify(chat.body)).toContain('"image_grid_thw":[13,32,32]');
    const file = readTensor(join(ecPath, 'ivl-v1', 'encoder_cache.safetensors'));
    expect(file).toMatchObject({ dtype: 'F32', shape: [3328, 896] });
    const dir = mkdtempSync(join(tmpdir(), 'epd-ivl-cli-'));
    writeFileSync(join(dir, 'in.png'), png);
    execFileSync(
      process.execPath,
      [
        'dist/cli/embed.js',
        join(dir, 'in.png'),
        '--model-dir',
        INTERNVL,
        '--npy',
        join(dir, 'out.npy'),
      ],
      { env: { ...process.env, EPD_ALLOW_REFERENCE_MODEL: 'true' } },
    );
    const npy = readFileSync(join(dir, 'out.npy'));
    const values = npy.subarray(10 + npy.readUInt16LE(8));
    expect(values.length).toBe(3328 * 896 * 4);
    expect(values.equals(file.data)).toBe(true);
  });

  it("Qwen3-VL video follows the directory's video_preprocessor_config.json, and without one is a 400 that names it", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'epd-modeldir-')), 'q3-no-video');
    cpSync(QWEN3_VL, dir, { recursive: true });
    rmSync(join(dir, 'video_preprocessor_config.json'));
    svc = await startServiceProcess({
      EPD_MODEL_DIR: `${QWEN3_VL},${dir}`,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const admin = (await request(svc.url).get('/admin/encoder')).body;
    expect(admin.preprocessing.per_model[0].video).toEqual({
      min_pixels: 4096,
      max_pixels: 25165824,
      cap_pixels_per_frame: false,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
    });
    expect(admin.preprocessing.per_model[1].video).toBeUndefined();
    const frame = dataUri(await image(640, 480, 'png'), 'image/png');
    const body = (id: string, model?: string) => ({
      req_id: id,
      modality: 'video',
      num_parts: 1,
      part_idx: 0,
      mm_items: [frame, frame, frame, frame],
      ...(model ? { model } : {}),
    });
    // Four 640×480 frames: 2 temporal patches of 30×40, 600 tokens.
    const ok = await request(svc.url).post('/encode').send(body('q3-video'));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ embedding_len: 600, embedding_dim: 10240 });
    const refused = await request(svc.url).post('/encode').send(body('q3-no-video', 'q3-no-video'));
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain(
      'model "q3-no-video" (qwen3-vl) takes no video here yet: its directory has no video_preprocessor_config.json',
    );
  });

  it('a directory whose tower is not a stand-in starts without EPD_ALLOW_REFERENCE_MODEL (and without an audio stand-in)', async () => {
    const dir = variant('config.json', () => undefined);
    const tower = join(dir, 'vision-encoder.onnx');
    writeUnmarkedModel(tower, tower);
    svc = await startServiceProcess({
      NODE_ENV: 'production',
      EPD_ALLOW_REFERENCE_MODEL: 'false',
      EPD_MODEL_DIR: dir,
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const health = (await request(svc.url).get('/health')).body;
    expect(health.details.encoder.models).toEqual([
      { kind: 'vision', name: 'model', family: 'qwen2-vl', reference: false },
    ]);
  });

  it('EPD_MAX_PIXELS still overrides the directory', async () => {
    svc = await startServiceProcess({
      EPD_MODEL_DIR: REFERENCE,
      EPD_MAX_PIXELS: '200704',
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const admin = (await request(svc.url).get('/admin/encoder')).body;
    expect(admin.preprocessing).toMatchObject({ min_pixels: 3136, max_pixels: 200704 });
  });

  it.each([
    [
      'a contradiction between the two files',
      variant('preprocessor_config.json', (j) => (j.patch_size = 16)),
      /preprocessor_config\.json: patch_size=16 contradicts .*config\.json: vision_config\.patch_size=14/,
    ],
    [
      'a missing key',
      variant('preprocessor_config.json', (j) => delete j.max_pixels),
      /preprocessor_config\.json: max_pixels is missing/,
    ],
    [
      'a family not served yet',
      variant('config.json', (j) => (j.model_type = 'internvl_chat')),
      /config\.json: model_type "internvl_chat" is not a family this encoder serves yet \(the original remote-code checkpoint; serve its transformers conversion/,
    ],
    [
      'a normalisation that divides by zero',
      variant('preprocessor_config.json', (j) => (j.image_std = [0.5, 0, 0.5])),
      /preprocessor_config\.json: image_std must be three positive numbers/,
    ],
    [
      "a Qwen3-VL config without its DeepStack layers (the width can't be known)",
      variant('config.json', (j) => {
        j.model_type = 'qwen3_vl';
        (j.vision_config as Record<string, unknown>).out_hidden_size = 2560;
      }),
      /config\.json: vision_config\.deepstack_visual_indexes is missing/,
    ],
    [
      "a tower whose input is not the directory's patch size (Qwen2-VL's tower, 16-pixel patches said)",
      edited(
        variant(
          'config.json',
          (j) => ((j.vision_config as Record<string, unknown>).patch_size = 16),
        ),
        'preprocessor_config.json',
        (j) => (j.patch_size = 16),
      ),
      /input 0 pixel_values has 1176 on axis 1, expected 1536/,
    ],
    [
      "a patch tower in an InternVL directory (Qwen2-VL's tower where 448-pixel tiles are said)",
      (() => {
        const dir = join(mkdtempSync(join(tmpdir(), 'epd-modeldir-')), 'ivl');
        cpSync(INTERNVL, dir, { recursive: true });
        cpSync(join(REFERENCE, 'vision-encoder.onnx'), join(dir, 'vision-encoder.onnx'));
        return dir;
      })(),
      /input 0 pixel_values has rank 2, expected 4.*Expected float32 \[tiles, 3, 448, 448\] → float32 \[tiles, 256, dim\]/,
    ],
    [
      'a width the tower does not output',
      variant(
        'config.json',
        (j) => ((j.vision_config as Record<string, unknown>).hidden_size = 2048),
      ),
      /outputs width 1536, but .*config\.json declares 2048/,
    ],
  ])('%s stops the start (exit 78) naming the file and the key', async (_what, dir, message) => {
    const { code, out } = await runServiceToExit({
      EPD_MODEL_DIR: dir,
      EPD_ALLOW_REFERENCE_MODEL: 'true',
    });
    expect(code).toBe(78);
    expect(out).toMatch(message);
  });

  it('EPD_MODEL_DIR and EPD_MODEL_PATH together stop the start', async () => {
    const { code, out } = await runServiceToExit({
      EPD_MODEL_DIR: REFERENCE,
      EPD_MODEL_PATH: join(REFERENCE, 'vision-encoder.onnx'),
      EPD_ALLOW_REFERENCE_MODEL: 'true',
    });
    expect(code).toBe(78);
    expect(out).toContain('both name the vision model: set one');
  });
});
