import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { projectRoot } from '../src/common/fs/project-root';
import { dataUri, image, tone } from './support/media';
import { sharedNatsUrl } from './support/shared-nats';
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

/** A copy of the reference directory with `edit` applied to one of its JSON files. */
function variant(file: string, edit: (json: Record<string, unknown>) => void): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'epd-modeldir-')), 'model');
  cpSync(REFERENCE, dir, { recursive: true });
  const path = join(dir, file);
  const json = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(json);
  writeFileSync(path, JSON.stringify(json));
  return dir;
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
      variant('config.json', (j) => (j.model_type = 'qwen3_vl')),
      /config\.json: model_type "qwen3_vl" is not a family this encoder serves yet \(16-pixel patches/,
    ],
    [
      'a normalisation that is not ours',
      variant('preprocessor_config.json', (j) => (j.image_mean = [0.5, 0.5, 0.5])),
      /preprocessor_config\.json: image_mean=\[0\.5,0\.5,0\.5\]: this encoder normalises with/,
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
