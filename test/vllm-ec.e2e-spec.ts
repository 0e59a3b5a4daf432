import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import request from 'supertest';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { startTestApp, type TestApp } from './support/app';
import { animatedGif, dataUri, image, tone } from './support/media';
import { pause, waitFor } from './support/wait';
import { runServiceToExit } from './support/service-process';

/**
 * vLLM's encode instance, end to end: the disagg proxy's exact request to
 * /v1/chat/completions, the ECExampleConnector file it leaves under EPD_VLLM_EC_PATH (read
 * back by a reader written here from the safetensors spec, not the service's writer), the
 * keys (the caller's uuid, else vLLM's mm_hash, checked against an independent Python
 * construction with Debian's b3sum), unsafe keys, the sweep, and registration with a proxy.
 */

const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const MODEL_ID = 'Qwen/Qwen2-VL-2B-Instruct';
const API_KEY = 'k'.repeat(24);
const TTL_S = 3;

/** safetensors, by its spec: u64 LE header length, JSON header, then the data. */
function readSafetensors(file: string): {
  header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  data: Buffer;
} {
  const raw = readFileSync(file);
  const n = Number(raw.readBigUInt64LE(0));
  const header = JSON.parse(raw.subarray(8, 8 + n).toString('utf8')) as ReturnType<
    typeof readSafetensors
  >['header'];
  return { header, data: raw.subarray(8 + n) };
}

/** The grid transformers' Qwen2-VL processor gives (test/interop/qwen2vl_reference.py's smart_resize). */
function referenceGrid(
  height: number,
  width: number,
  minPixels: number,
  maxPixels: number,
): number[] {
  const out = execFileSync(PYTHON, [
    '-c',
    'import sys, json; sys.path.insert(0, "test/interop"); from qwen2vl_reference import smart_resize; ' +
      `h, w = smart_resize(${height}, ${width}, ${minPixels}, ${maxPixels}); print(json.dumps([1, h // 14, w // 14]))`,
  ]).toString();
  return JSON.parse(out) as number[];
}

function goldenMmHash(file: Buffer, algorithm: string, converted: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), 'epd-mmhash-'));
  const path = join(dir, 'item');
  writeFileSync(path, file);
  return execFileSync(PYTHON, [
    'test/interop/vllm_mm_hash.py',
    path,
    MODEL_ID,
    algorithm,
    converted ? 'converted' : 'plain',
  ])
    .toString()
    .trim();
}

/** A stand-in for vLLM's disagg proxy: records /instances calls and probes /health. */
class FakeProxy {
  readonly calls: { method: string; apiKey?: string; body: Record<string, unknown> }[] = [];
  private server?: Server;

  async start(): Promise<string> {
    this.server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.url === '/instances') {
          this.calls.push({
            method: req.method!,
            apiKey: req.headers['x-api-key'] as string | undefined,
            body: JSON.parse(body || '{}') as Record<string, unknown>,
          });
          res.writeHead(req.headers['x-api-key'] === API_KEY ? 200 : 401).end('{}');
        } else res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((r) => this.server!.close(() => r()));
  }
}

/** The body vLLM's proxy sends an encode instance for one part (disagg_epd_proxy.py). */
function proxyBody(part: Record<string, unknown>): Record<string, unknown> {
  return {
    model: MODEL_ID,
    messages: [{ role: 'user', content: [part] }],
    stream: false,
  };
}

/** The proxy's uuid for a part: sha256 of its URL string. */
const contentUuid = (url: string) => createHash('sha256').update(url).digest('hex');

describe("vLLM's encode instance (e2e: /v1/chat/completions, ECExampleConnector files, the proxy)", () => {
  let t: TestApp;
  let ecPath: string;
  const proxy = new FakeProxy();
  let closed = false;

  const chat = (body: unknown, requestId = 'req-1') =>
    request(t.httpUrl)
      .post('/v1/chat/completions')
      .set('x-request-id', requestId)
      .send(body as object);
  const entries = () => readdirSync(ecPath).sort();

  beforeAll(async () => {
    ecPath = mkdtempSync(join(tmpdir(), 'epd-ec-'));
    const proxyUrl = await proxy.start();
    t = await startTestApp({
      EPD_VLLM_EC_PATH: ecPath,
      EPD_VLLM_MODEL_ID: MODEL_ID,
      EPD_VLLM_EC_TTL_S: String(TTL_S),
      EPD_VLLM_PROXY_URL: proxyUrl,
      EPD_VLLM_PROXY_API_KEY: API_KEY,
      EPD_STAGING_DTYPE: 'bfloat16',
      EPD_SEND_TIMEOUT_MS: '60000',
    });
  });
  afterAll(async () => {
    if (!closed) await t.close();
    await proxy.close();
  });

  it("the proxy's exact request gives an ec_cache bf16 [t·h·w/4, dim] file with the bytes the SGLang route delivers, and the processor's grid", async () => {
    const png = await image(112, 84, 'png', { r: 200, g: 30, b: 90 });
    const url = dataUri(png, 'image/png');
    const uuid = contentUuid(url);
    const res = await chat(proxyBody({ type: 'image_url', image_url: { url }, uuid }), 'rid-42');
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('rid-42');
    const grid = referenceGrid(84, 112, t.config.encoder.minPixels, t.config.encoder.maxPixels);
    expect(res.body).toMatchObject({
      id: 'chatcmpl-rid-42',
      object: 'chat.completion',
      model: MODEL_ID,
      usage: { prompt_tokens: 12, completion_tokens: 0 },
      ec_transfer_params: { ec_items: [{ mm_hash: uuid, image_grid_thw: grid }] },
    });

    const file = join(ecPath, uuid, 'encoder_cache.safetensors');
    const { header, data } = readSafetensors(file);
    const rows = (grid[0]! * grid[1]! * grid[2]!) / 4;
    expect(Object.keys(header).filter((k) => k !== '__metadata__')).toEqual(['ec_cache']);
    expect(header.ec_cache).toEqual({
      dtype: 'BF16',
      shape: [rows, 1024],
      data_offsets: [0, rows * 1024 * 2],
    });
    expect(data.length).toBe(rows * 1024 * 2);
    // Only the finished file is there: no temporary name left beside it.
    expect(readdirSync(join(ecPath, uuid))).toEqual(['encoder_cache.safetensors']);

    // The same image over SGLang's route, pushed to a TCP receiver: the same bytes.
    let pushed: Buffer | undefined;
    const rx = await ReferenceReceiver.start({
      onFrame: (f) => {
        pushed = Buffer.from(f.data);
      },
    });
    try {
      const enc = await request(t.httpUrl)
        .post('/encode')
        .send({
          req_id: 'sglang-same',
          modality: 'image',
          num_parts: 1,
          part_idx: 0,
          mm_items: [url],
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
        });
      expect(enc.status).toBe(200);
      expect(pushed).toBeDefined();
      expect(Buffer.compare(pushed!, data)).toBe(0);
    } finally {
      await rx.close();
    }
  });

  it('several parts in one call (image, video, audio; a repeated uuid encoded once), each its own file', async () => {
    const png = dataUri(await image(56, 56, 'png'), 'image/png');
    const gif = dataUri(await animatedGif(56, 56, 4), 'image/gif');
    const wav = tone(1.0).toString('base64');
    const res = await chat({
      model: MODEL_ID,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'describe' },
            { type: 'image_url', image_url: { url: png }, uuid: 'multi-img' },
            { type: 'video_url', video_url: { url: gif }, uuid: 'multi-vid' },
            { type: 'input_audio', input_audio: { data: wav, format: 'wav' }, uuid: 'multi-aud' },
            { type: 'image_url', image_url: { url: png }, uuid: 'multi-img' },
          ],
        },
      ],
      stream: false,
    });
    expect(res.status).toBe(200);
    const items = res.body.ec_transfer_params.ec_items as Record<string, unknown>[];
    expect(items).toEqual([
      { mm_hash: 'multi-img', image_grid_thw: [1, 4, 4] },
      { mm_hash: 'multi-vid', video_grid_thw: [2, 4, 4] },
      { mm_hash: 'multi-aud', audio_feature_lengths: [100] },
      { mm_hash: 'multi-img', image_grid_thw: [1, 4, 4] },
    ]);
    expect(
      readSafetensors(join(ecPath, 'multi-vid', 'encoder_cache.safetensors')).header.ec_cache!
        .shape,
    ).toEqual([8, 1024]);
    expect(
      readSafetensors(join(ecPath, 'multi-img', 'encoder_cache.safetensors')).header.ec_cache!
        .shape,
    ).toEqual([4, 1024]);
    const audio = readSafetensors(join(ecPath, 'multi-aud', 'encoder_cache.safetensors'));
    expect(audio.header.ec_cache!.shape[0]).toBeGreaterThan(0);
    // Nothing stays staged once the files are written.
    await waitFor(
      async () => (await request(t.httpUrl).get('/admin/requests')).body.staging.states === 0,
      10_000,
    );
  });

  it("without a uuid the key is vLLM's mm_hash (blake3) for EPD_VLLM_MODEL_ID: a plain RGB PNG and a converted RGBA PNG", async () => {
    const rgb = await image(64, 48, 'png', { r: 1, g: 2, b: 3 });
    const rgba = await sharp({
      create: { width: 64, height: 48, channels: 4, background: { r: 9, g: 8, b: 7, alpha: 0.5 } },
    })
      .png()
      .toBuffer();
    for (const [file, converted] of [
      [rgb, false],
      [rgba, true],
    ] as const) {
      const golden = goldenMmHash(file, 'blake3', converted);
      const res = await chat(
        proxyBody({ type: 'image_url', image_url: { url: dataUri(file, 'image/png') } }),
      );
      expect(res.status).toBe(200);
      expect(res.body.ec_transfer_params.ec_items[0].mm_hash).toBe(golden);
      expect(existsSync(join(ecPath, golden, 'encoder_cache.safetensors'))).toBe(true);
      // The other form's hash differs: the mode decides the stream.
      expect(goldenMmHash(file, 'blake3', !converted)).not.toBe(golden);
    }
  });

  it('an unsafe key is a 400 that names it, and writes nothing', async () => {
    const url = dataUri(await image(32, 32, 'png'), 'image/png');
    const before = entries();
    for (const uuid of [
      '..',
      '.',
      'a/b',
      '../escape',
      'nul\u0000byte',
      'x'.repeat(256),
      '',
      '.hidden',
      'back\\slash',
    ]) {
      const res = await chat(proxyBody({ type: 'image_url', image_url: { url }, uuid }));
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ type: 'unsafe_ec_key' });
      expect(res.body.message).toContain('cannot name a directory under EPD_VLLM_EC_PATH');
    }
    expect(entries()).toEqual(before);
    expect(existsSync(join(ecPath, '..', 'escape'))).toBe(false);
  });

  it('bad bodies are clear 400s: no media part, stream=true, an unknown part type, an audio part without uuid', async () => {
    const cases: [unknown, string][] = [
      [{ model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }] }, 'no image_url'],
      [
        { ...proxyBody({ type: 'image_url', image_url: { url: 'data:,' } }), stream: true },
        'stream=true',
      ],
      [proxyBody({ type: 'image_embeds', image_embeds: {} }), 'image_url, video_url, audio_url'],
      [
        proxyBody({
          type: 'input_audio',
          input_audio: { data: tone(0.1).toString('base64'), format: 'wav' },
        }),
        'needs a uuid',
      ],
    ];
    for (const [body, text] of cases) {
      const res = await chat(body);
      expect(res.status).toBe(400);
      expect(res.body.message).toContain(text);
    }
  });

  it('a key the path cannot take (a file where its directory goes) is a 503 naming the path; no partial file', async () => {
    writeFileSync(join(ecPath, 'blocked'), 'not a directory');
    const url = dataUri(await image(32, 32, 'png'), 'image/png');
    const res = await chat(proxyBody({ type: 'image_url', image_url: { url }, uuid: 'blocked' }));
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ type: 'ec_path_unwritable' });
    expect(res.body.message).toContain('EPD_VLLM_EC_PATH cannot be written');
    expect(readFileSync(join(ecPath, 'blocked'), 'utf8')).toBe('not a directory');
    const admin = (await request(t.httpUrl).get('/admin/vllm')).body;
    expect(admin.ec.writes.failed).toBeGreaterThanOrEqual(1);
    expect(admin.ec.lastError).toContain('blocked');
  });

  it('the sweep deletes a file not re-published within the TTL and the empty directories consumers leave; a file in use stays', async () => {
    const url = dataUri(await image(40, 40, 'png'), 'image/png');
    const publish = (uuid: string) =>
      chat(proxyBody({ type: 'image_url', image_url: { url }, uuid }));
    expect((await publish('goes')).status).toBe(200);
    mkdirSync(join(ecPath, 'consumer-miss')); // what a consumer's lookup leaves on a miss
    // 'stays' is re-published every second for longer than the TTL: it is in use.
    for (let i = 0; i < TTL_S + 2; i++) {
      expect((await publish('stays')).status).toBe(200);
      await pause(1000, 'the TTL runs between re-publications');
    }
    await waitFor(() => !existsSync(join(ecPath, 'goes')), 10_000);
    await waitFor(() => !existsSync(join(ecPath, 'consumer-miss')), 10_000);
    expect(existsSync(join(ecPath, 'stays', 'encoder_cache.safetensors'))).toBe(true);
    const metrics = (await request(t.httpUrl).get('/metrics')).text;
    expect(metrics).toMatch(/epd_encoder_vllm_ec_evictions_total\{reason="ttl"\} [1-9]/);
    expect(metrics).toMatch(/epd_encoder_vllm_ec_evictions_total\{reason="empty_dir"\} [1-9]/);
  });

  it('registers with the proxy (role encode, its URL, X-API-Key), answers its /health, and leaves it on shutdown', async () => {
    await waitFor(() => proxy.calls.some((c) => c.method === 'POST'), 10_000);
    const post = proxy.calls.find((c) => c.method === 'POST')!;
    expect(post.apiKey).toBe(API_KEY);
    expect(post.body).toEqual({ role: 'encode', url: t.httpUrl, ec_zmq_addrs: [], dp_size: 1 });
    expect((await request(t.httpUrl).get('/health')).status).toBe(200);
    const admin = (await request(t.httpUrl).get('/admin/vllm')).body;
    expect(admin.proxies).toEqual([expect.objectContaining({ registered: true })]);
    await t.close();
    closed = true;
    const del = proxy.calls.filter((c) => c.method === 'DELETE');
    expect(del).toHaveLength(1);
    expect(del[0]!.body).toEqual(post.body);
  });
});

describe("vLLM's EC path that cannot be used (e2e, the built service)", () => {
  it('stops the start (exit 78) naming the path', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'epd-ec-bad-')), 'a-file');
    writeFileSync(file, '');
    const { code, out } = await runServiceToExit({
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_VLLM_EC_PATH: join(file, 'ec'),
      EPD_VLLM_MODEL_ID: MODEL_ID,
    });
    expect(code).toBe(78);
    expect(out).toContain(
      `epd-encoder: EPD_VLLM_EC_PATH ${join(file, 'ec')} is not a writable directory`,
    );
  });
});
