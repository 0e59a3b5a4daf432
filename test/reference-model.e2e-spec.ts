import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { referenceModelPaths } from '../src/config/model-paths';
import { sharedNatsUrl } from './support/shared-nats';
import { writeUnmarkedModel } from './support/unmarked-model';
import {
  runServiceToExit as runToExit,
  startServiceProcess,
  type ServiceProcess,
} from './support/service-process';

/**
 * No stand-in served by accident: the generated reference models (random weights) carry a
 * marker, a process that would serve one without EPD_ALLOW_REFERENCE_MODEL=true refuses to
 * start (exit 78, a message naming the files), and /health and /metrics say which models
 * answer and whether each is a stand-in. An execution provider that is not installed stops
 * the start the same way, naming how to install it.
 */

describe('reference models are never served by accident (e2e, the built service)', () => {
  let svc: ServiceProcess | undefined;
  afterEach(async () => {
    await svc?.stop();
    svc = undefined;
  });

  it('refuses to start with a reference model and without EPD_ALLOW_REFERENCE_MODEL: exit 78, naming the files', async () => {
    const { code, out } = await runToExit({});
    expect(code).toBe(78);
    expect(out).toContain('epd-encoder: refusing to serve a generated reference model');
    expect(out).toContain(referenceModelPaths().vision);
    expect(out).toContain('EPD_ALLOW_REFERENCE_MODEL=true');
  });

  it('an execution provider that is not installed stops the start, naming the install command', async () => {
    const { code, out } = await runToExit({
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_ORT_EXECUTION_PROVIDERS: 'cuda,cpu',
    });
    expect(code).toBe(78);
    expect(out).toContain(
      "EPD_ORT_EXECUTION_PROVIDERS names cuda, but onnxruntime-node's cuda provider is not installed",
    );
    expect(out).toContain('ONNXRUNTIME_NODE_INSTALL=cuda12');
  });

  it('allowed, the stand-in says so in /health and /metrics', async () => {
    svc = await startServiceProcess({
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const health = (await request(svc.url).get('/health')).body;
    expect(health.details.encoder.models).toEqual([
      { kind: 'vision', name: 'vision-encoder', family: 'qwen2-vl', reference: true },
      { kind: 'audio', name: 'audio-encoder', family: 'qwen2-audio', reference: true },
    ]);
    const metrics = (await request(svc.url).get('/metrics')).text;
    expect(metrics).toMatch(
      /epd_encoder_model_info\{name="vision-encoder",family="qwen2-vl",reference="true"\} 1/,
    );
    expect(svc.output()).toContain('serving a generated REFERENCE model');
  });

  it('a model without the marker starts without the flag, and is reported as no stand-in', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'epd-real-'));
    const paths = referenceModelPaths();
    const vision = writeUnmarkedModel(paths.vision, join(dir, 'tower-v.onnx'));
    const audio = writeUnmarkedModel(paths.audio, join(dir, 'tower-a.onnx'));
    svc = await startServiceProcess({
      NODE_ENV: 'production',
      EPD_ALLOW_REFERENCE_MODEL: 'false',
      EPD_MODEL_PATH: vision,
      EPD_AUDIO_MODEL_PATH: audio,
      EPD_NATS_URL: sharedNatsUrl(),
    });
    const health = (await request(svc.url).get('/health')).body;
    expect(health.details.encoder.models).toEqual([
      { kind: 'vision', name: 'tower-v', family: 'qwen2-vl', reference: false },
      { kind: 'audio', name: 'tower-a', family: 'qwen2-audio', reference: false },
    ]);
    const metrics = (await request(svc.url).get('/metrics')).text;
    expect(metrics).toMatch(
      /epd_encoder_model_info\{name="tower-v",family="qwen2-vl",reference="false"\} 1/,
    );
    expect(svc.output()).not.toContain('REFERENCE model');
  });
});
