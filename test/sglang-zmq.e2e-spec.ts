import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import request from 'supertest';
import { startTestApp, type TestApp } from './support/app';
import { waitFor } from './support/calls';
import { animatedGif, dataUri, image, tone } from './support/media';

/**
 * SGLang's ZMQ wire, end to end: the service pushes to a Python receiver that binds a
 * PULL socket and reassembles with SGLang's receiver logic and restricted unpickler
 * (test/interop/sglang_stub/: a port of SGLang's receiver, first read at commit 20b5ba6e and
 * brought up to the stricter receiver of 2026-08/09, with torch replaced by a numpy stand-in;
 * its Modality enum is today's unless SGLANG_MODALITY_ENUM=legacy). Both backends SGLang chooses between are covered:
 * zmq_to_tokenizer (prefill_host + embedding_port in /encode) and zmq_to_scheduler
 * (each TP rank registers through /scheduler_receive_url), plus the legacy port list,
 * multi-part requests, receive_count > 1 and the error frame.
 */
interface PyResult {
  status: 'success' | 'fail' | 'timeout';
  messages: number;
  dropped: number;
  error_msg?: string;
  error_code?: number;
  modalities?: string[];
  dtype?: string;
  shapes?: Record<string, number[]>;
  grids?: Record<string, unknown>;
  matches_reference?: boolean;
  match_detail?: string;
}

const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const children: ChildProcess[] = [];

/** Starts one receiver (a scheduler rank or the tokenizer) and resolves once it is bound. */
async function pyReceiver(
  rid: string,
  expectNpy?: string,
  options: { modalityEnum?: 'current' | 'legacy'; timeoutS?: number } = {},
): Promise<{ port: number; result: Promise<PyResult> }> {
  const args = [
    'test/interop/receive.py',
    '--rid',
    rid,
    '--timeout',
    String(options.timeoutS ?? 30),
  ];
  if (expectNpy) args.push('--expect-npy', expectNpy);
  const env = { ...process.env, SGLANG_MODALITY_ENUM: options.modalityEnum ?? 'current' };
  const child = spawn(PYTHON, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  children.push(child);
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  const { port } = JSON.parse(String(first.value)) as { port: number };
  const result = lines.next().then((l) => JSON.parse(String(l.value)) as PyResult);
  return { port, result };
}

/** The reference embedding of `file`, float32, computed without the service (epd-embed). */
function referenceNpy(file: Buffer, ext: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'epd-sglang-'));
  const input = join(dir, `in.${ext}`);
  writeFileSync(input, file);
  const out = join(dir, 'ref.npy');
  execFileSync(process.execPath, ['dist/cli/embed.js', input, '--npy', out]);
  return out;
}

/** One request of three parts, one per modality: image, audio, video (an animated GIF). */
async function threeParts(rid: string): Promise<Record<string, unknown>[]> {
  const png = await image(56, 56, 'png', { r: 90, g: 20, b: 200 });
  const gif = await animatedGif(56, 56, 4);
  const items: [string, string][] = [
    ['image', dataUri(png, 'image/png')],
    ['audio', dataUri(tone(1.0), 'audio/wav')],
    ['video', dataUri(gif, 'image/gif')],
  ];
  return items.map(([modality, item], i) => ({
    req_id: `${rid}_local_part_${i}`,
    modality,
    num_parts: 3,
    part_idx: i,
    mm_items: [item],
  }));
}

/** What SGLang's receiver must reassemble from threeParts (grids as its processors give). */
const THREE_PARTS_RESULT = {
  status: 'success',
  messages: 3,
  dropped: 0,
  modalities: ['AUDIO', 'IMAGE', 'VIDEO'],
  grids: {
    img_grid_thw: [[1, 4, 4]],
    video_grid_thw: [[2, 4, 4]],
    audio_feature_lens: [100],
  },
};

describe('SGLang ZMQ wire (e2e, Python receiver)', () => {
  let t: TestApp;
  let png: Buffer;
  let png2: Buffer;

  const encode = (body: Record<string, unknown>) =>
    request(t.httpUrl)
      .post('/encode')
      .send({ modality: 'image', num_parts: 1, part_idx: 0, ...body })
      .then((r) => r);
  const register = (reqId: string, port: number, receiveCount: number) =>
    request(t.httpUrl)
      .post('/scheduler_receive_url')
      .send({
        req_id: reqId,
        receive_count: receiveCount,
        receive_url: `127.0.0.1:${port}`,
        modality: 'IMAGE', // SGLang sends it; it is accepted and ignored
      })
      .then((r) => r);
  const requests = async () =>
    (await request(t.httpUrl).get('/admin/requests')).body as {
      staging: { states: number; usedBytes: number; startWaiters: number };
    };

  beforeAll(async () => {
    t = await startTestApp({
      EPD_TRANSFER_BACKEND: 'zmq',
      EPD_STAGING_DTYPE: 'bfloat16',
      EPD_SEND_TIMEOUT_MS: '60000',
    });
    png = await image(112, 84, 'png', { r: 200, g: 30, b: 90 });
    png2 = await image(56, 56, 'png', { r: 10, g: 200, b: 40 });
  });
  afterEach(async () => {
    // Every request ended: nothing staged is left behind.
    await waitFor(async () => (await requests()).staging.states === 0, 10_000);
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill();
    await t.close();
  });

  it('zmq_to_tokenizer: the receiver gets the exact embedding in bfloat16 (bits match an independent conversion), with its grid', async () => {
    const rx = await pyReceiver('tok', referenceNpy(png, 'png'));
    const res = await encode({
      req_id: 'tok_local_part_0',
      mm_items: [dataUri(png, 'image/png')],
      prefill_host: '127.0.0.1',
      embedding_port: rx.port,
      // SGLang's extra /encode fields: accepted and ignored
      encoder_idx: 0,
      encoder_url: 'http://127.0.0.1:1',
      time_stats_json: '{}',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      embedding_len: 12,
      embedding_dim: 1024,
      embedding_size: 12 * 1024 * 2, // bfloat16
    });
    const got = await rx.result;
    expect(got).toMatchObject({
      status: 'success',
      messages: 1,
      modalities: ['IMAGE'],
      dtype: 'bfloat16',
      shapes: { IMAGE: [12, 1024] },
      grids: { img_grid_thw: [[1, 6, 8]], video_grid_thw: null, audio_feature_lens: null },
      matches_reference: true,
    });
  });

  it('zmq_to_scheduler: two TP ranks register per part (receive_count 2); each reassembles a two-part image + audio request', async () => {
    const wav = tone(1.0);
    const ranks = [await pyReceiver('sched'), await pyReceiver('sched')];
    const parts = [
      { req_id: 'sched_local_part_0', mm_items: [dataUri(png, 'image/png')] },
      {
        req_id: 'sched_local_part_1',
        modality: 'audio',
        part_idx: 1,
        mm_items: [dataUri(wav, 'audio/wav')],
      },
    ];
    const [encodes] = await Promise.all([
      Promise.all(parts.map((p) => encode({ ...p, num_parts: 2 }))),
      ...parts.flatMap((p) => ranks.map((r) => register(p.req_id, r.port, 2))),
    ]);
    for (const e of encodes) expect(e.status).toBe(200);
    const audioLen = (encodes[1]!.body as { embedding_len: number }).embedding_len;
    const audioDim = (encodes[1]!.body as { embedding_dim: number }).embedding_dim;
    for (const r of ranks) {
      expect(await r.result).toMatchObject({
        status: 'success',
        messages: 2,
        modalities: ['AUDIO', 'IMAGE'],
        shapes: { IMAGE: [12, 1024], AUDIO: [audioLen, audioDim] },
        // audio_feature_lens: the valid mel frames (1 s = 100), as Qwen2-Audio's processor gives.
        grids: { img_grid_thw: [[1, 6, 8]], audio_feature_lens: [100] },
      });
    }
  });

  it('the legacy port list: /encode with embedding_port [p1, p2] pushes to every port', async () => {
    const rxs = [await pyReceiver('legacy'), await pyReceiver('legacy')];
    const res = await encode({
      req_id: 'legacy_local_part_0',
      mm_items: [dataUri(png2, 'image/png')],
      prefill_host: '127.0.0.1',
      embedding_port: rxs.map((r) => r.port),
    });
    expect(res.status).toBe(200);
    for (const r of rxs) {
      expect(await r.result).toMatchObject({
        status: 'success',
        shapes: { IMAGE: [4, 1024] },
        grids: { img_grid_thw: [[1, 4, 4]] },
      });
    }
  });

  it('a failed encode sends registered receivers the error frame (error_msg, error_code), so they fail now', async () => {
    const rx = await pyReceiver('bad');
    const registering = register('bad_local_part_0', rx.port, 1);
    await waitFor(async () => (await requests()).staging.startWaiters === 1, 10_000);
    const res = await encode({
      req_id: 'bad_local_part_0',
      mm_items: ['data:image/png;base64,' + Buffer.from('not a png').toString('base64')],
    });
    expect(res.status).toBe(400);
    expect((await registering).status).toBe(200);
    const got = await rx.result;
    expect(got.status).toBe('fail');
    expect(got.error_code).toBe(400);
    expect(got.error_msg).toContain('Error while loading data');
  });

  it('an image, an audio and a video part reach the current receiver (Modality IMAGE=1, VIDEO=2, AUDIO=3) in both zmq modes', async () => {
    // zmq_to_scheduler: one rank registers for every part.
    const rank = await pyReceiver('three');
    const parts = await threeParts('three');
    const [encodes] = await Promise.all([
      Promise.all(parts.map((p) => encode(p))),
      ...parts.map((p) => register(String(p.req_id), rank.port, 1)),
    ]);
    for (const e of encodes) expect(e.status).toBe(200);
    expect(await rank.result).toMatchObject(THREE_PARTS_RESULT);

    // zmq_to_tokenizer: every part's /encode names the tokenizer's one port.
    const tok = await pyReceiver('three-tok');
    const tokParts = await threeParts('three-tok');
    const tokEncodes = await Promise.all(
      tokParts.map((p) => encode({ ...p, prefill_host: '127.0.0.1', embedding_port: tok.port })),
    );
    for (const e of tokEncodes) expect(e.status).toBe(200);
    expect(await tok.result).toMatchObject(THREE_PARTS_RESULT);
  });

  it('a registration that arrives after its encode failed is answered 200, as the SGLang encoder does, and its receiver gets the encode error frame', async () => {
    const res = await encode({
      req_id: 'late_local_part_0',
      mm_items: ['data:image/png;base64,' + Buffer.from('not a png').toString('base64')],
    });
    expect(res.status).toBe(400);
    const rx = await pyReceiver('late', undefined, { timeoutS: 10 });
    const late = await register('late_local_part_0', rx.port, 1);
    expect(late.status).toBe(200);
    // The failed encode's error frame goes to the late receiver too: it fails now, with
    // the encode's status and message, instead of waiting for its own timeout.
    const got = await rx.result;
    expect(got.status).toBe('fail');
    expect(got.error_code).toBe(400);
    expect(got.error_msg).toContain('Error while loading data');
  });

  it('/send naming a Mooncake session is refused with a clear 400', async () => {
    const res = await request(t.httpUrl).post('/send').send({
      req_id: 'mc',
      prefill_host: '127.0.0.1',
      embedding_port: 1,
      session_id: 'mooncake-session',
      buffer_address: 140000000,
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ type: 'mooncake_unsupported' });
    expect(res.body.message).toContain('Mooncake');
  });
});

/** A service configured for SGLang releases before 2026-04 (EPD_ZMQ_MODALITY_VALUES=legacy). */
describe('SGLang ZMQ wire, legacy Modality values (e2e, Python receiver)', () => {
  let legacy: TestApp;
  beforeAll(async () => {
    legacy = await startTestApp({
      EPD_TRANSFER_BACKEND: 'zmq',
      EPD_ZMQ_MODALITY_VALUES: 'legacy',
      EPD_SEND_TIMEOUT_MS: '60000',
    });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill();
    await legacy.close();
  });

  it('the finding, reproduced: the legacy values (AUDIO=4, VIDEO=3) against the current receiver fail the audio part and read video as audio', async () => {
    const audioRx = await pyReceiver('old-audio');
    const [audio] = (await threeParts('old-audio')).slice(1, 2);
    const res = await request(legacy.httpUrl)
      .post('/encode')
      .send({ ...audio, num_parts: 1, part_idx: 0, req_id: 'old-audio_local_part_0' });
    expect(res.status).toBe(200);
    await request(legacy.httpUrl)
      .post('/scheduler_receive_url')
      .send({
        req_id: 'old-audio_local_part_0',
        receive_count: 1,
        receive_url: `127.0.0.1:${audioRx.port}`,
      })
      .expect(200);
    const audioGot = await audioRx.result;
    expect(audioGot.status).toBe('fail');
    expect(audioGot.error_msg).toContain('4 is not a valid Modality');

    const videoRx = await pyReceiver('old-video');
    const [video] = (await threeParts('old-video')).slice(2);
    const vres = await request(legacy.httpUrl)
      .post('/encode')
      .send({ ...video, num_parts: 1, part_idx: 0, req_id: 'old-video_local_part_0' });
    expect(vres.status).toBe(200);
    await request(legacy.httpUrl)
      .post('/scheduler_receive_url')
      .send({
        req_id: 'old-video_local_part_0',
        receive_count: 1,
        receive_url: `127.0.0.1:${videoRx.port}`,
      })
      .expect(200);
    // Modality(3) is AUDIO today: the video's grid lands in audio_feature_lens.
    expect(await videoRx.result).toMatchObject({
      status: 'success',
      modalities: ['AUDIO'],
      grids: { video_grid_thw: null },
    });
  });

  it('EPD_ZMQ_MODALITY_VALUES=legacy serves a receiver from before 2026-04 (MULTI_IMAGES in the enum) in both zmq modes', async () => {
    const send = (body: Record<string, unknown>) =>
      request(legacy.httpUrl).post('/encode').send(body);
    const rank = await pyReceiver('old3', undefined, { modalityEnum: 'legacy' });
    const parts = await threeParts('old3');
    const [encodes] = await Promise.all([
      Promise.all(parts.map((p) => send(p))),
      ...parts.map((p) =>
        request(legacy.httpUrl)
          .post('/scheduler_receive_url')
          .send({ req_id: p.req_id, receive_count: 1, receive_url: `127.0.0.1:${rank.port}` }),
      ),
    ]);
    for (const e of encodes) expect(e.status).toBe(200);
    expect(await rank.result).toMatchObject(THREE_PARTS_RESULT);

    const tok = await pyReceiver('old3-tok', undefined, { modalityEnum: 'legacy' });
    const tokParts = await threeParts('old3-tok');
    const tokEncodes = await Promise.all(
      tokParts.map((p) => send({ ...p, prefill_host: '127.0.0.1', embedding_port: tok.port })),
    );
    for (const e of tokEncodes) expect(e.status).toBe(200);
    expect(await tok.result).toMatchObject(THREE_PARTS_RESULT);
  });
});

/**
 * A video's timing on SGLang's wire: its EmbeddingData carries the "video meta" attributes
 * SGLang's encoder sets (one entry per video), which its receiver chains across parts into
 * the kwargs of its position code: Qwen3-VL's `video_timestamps`, Qwen2.5-VL's
 * `second_per_grid_ts`, at the request's `fps` (2 by default); the generated reference
 * directories of Qwen3-VL-4B and Qwen2.5-VL-3B.
 */
describe("SGLang ZMQ wire: a video's timing for Qwen3-VL and Qwen2.5-VL (e2e, Python receiver)", () => {
  let t: TestApp;
  const root = join(__dirname, '..', 'models');
  beforeAll(async () => {
    t = await startTestApp({
      EPD_TRANSFER_BACKEND: 'zmq',
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      EPD_MODEL_DIR: `${join(root, 'qwen3-vl-4b-reference')},qwen25=${join(root, 'qwen2.5-vl-3b-reference')}`,
      EPD_CACHE_MAX_BYTES: String(64 * 1024 * 1024),
    });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill();
    await t.close();
  });

  let gif: Buffer | undefined;
  const video = async (rid: string, port: number, extra: Record<string, unknown>) => {
    gif ??= await animatedGif(64, 64, 5); // one clip for every request: the cache may answer
    return request(t.httpUrl)
      .post('/encode')
      .send({
        req_id: `${rid}_local_part_0`,
        modality: 'video',
        num_parts: 1,
        part_idx: 0,
        mm_items: [dataUri(gif, 'image/gif')],
        prefill_host: '127.0.0.1',
        embedding_port: port,
        ...extra,
      });
  };

  it('Qwen3-VL: one timestamp per temporal patch (five frames at 2 fps: 0.25, 1.25, 2.0 s)', async () => {
    const rx = await pyReceiver('q3t');
    const res = await video('q3t', rx.port, {});
    expect(res.status).toBe(200);
    expect(await rx.result).toMatchObject({
      status: 'success',
      modalities: ['VIDEO'],
      grids: { video_grid_thw: [[3, 4, 4]], video_timestamps: [[0.25, 1.25, 2]] },
    });
    // The same video again, answered by the cache (nothing encoded): the same timing, from
    // its frames' headers; at 1 fps, twice the times.
    const again = await pyReceiver('q3t2');
    expect((await video('q3t2', again.port, { fps: 1 })).body.timings).toMatchObject({
      cache_hits: 1,
    });
    expect(await again.result).toMatchObject({
      grids: { video_timestamps: [[0.5, 2.5, 4]] },
    });
  });

  it('Qwen2.5-VL: seconds per grid step, temporal_patch_size / fps (fps 4: 0.5)', async () => {
    const rx = await pyReceiver('q25t');
    const res = await video('q25t', rx.port, { model: 'qwen25', fps: 4 });
    expect(res.status).toBe(200);
    const got = await rx.result;
    expect(got).toMatchObject({
      status: 'success',
      grids: { second_per_grid_ts: [0.5] },
    });
    expect(got.grids).not.toHaveProperty('video_timestamps');
  });

  it('a bad fps is a 400 that names it', async () => {
    const res = await video('badfps', 1, { fps: 0 });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe('fps must be above 0');
  });
});
