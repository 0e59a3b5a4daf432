import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { InferenceSession } from 'onnxruntime-node';
import { referenceModelPaths } from '../config/model-paths';
import { audioRows, melBins, modelInputs } from '../encoder/backend/model-inputs';
import { DEFAULT_N_MELS } from '../encoder/pipeline/model-contract';
import { MODALITIES, type Modality } from '../encoder/encode-request.schema';
import preprocess from '../encoder/preprocess/preprocess.worker';
import { npyHeader } from '../transfer/npy';
import { DEFAULT_GEOMETRY } from '../common/vision-geometry';
import { readModelDir } from '../config/model-dir';
import { loadConfig } from '../config/config.loader';

const USAGE = `usage: epd-embed <file>... [--modality image|video|audio] [--model PATH | --model-dir DIR] [--min-pixels N] [--max-pixels N] [--npy OUT] [--patches OUT]

Computes, without the service, the embedding the encoder produces for these media: the
same preprocessing, then one bare ONNX Runtime forward. Prints {shape, grids, tokens,
sha256} (sha256 of the float32 little-endian bytes); --npy also writes the array. Use it
to check what a receiver got, or to debug a model.

--model-dir DIR takes a model directory as EPD_MODEL_DIR does: its tower, its patch
geometry (patch, merge, mean, std) and its min/max pixels (unless --min-pixels /
--max-pixels are given). Without it: the default model, Qwen2-VL's geometry, and the
service's default min/max pixels.

--patches OUT writes what the model sees instead (the preprocessed rows, float32
[rows, 1176] for 14-pixel patches, [rows, 1536] for 16, [tiles, 602112] for InternVL's
448-pixel tiles) and skips the forward: compare it with a reference processor.`;

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      modality: { type: 'string', default: 'image' },
      model: { type: 'string' },
      'model-dir': { type: 'string' },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      npy: { type: 'string' },
      patches: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(values.help ? 0 : 2);
  }
  const modality = values.modality as Modality;
  if (!(MODALITIES as readonly string[]).includes(modality))
    throw new Error(`unsupported modality: ${modality}`);
  // The service's defaults (config/default.yaml), not this shell's EPD_* settings.
  const defaults = loadConfig({}).config.encoder;
  const dir = values['model-dir'] ? readModelDir(values['model-dir'], process.cwd()) : undefined;
  if (dir && values.model) throw new Error('--model and --model-dir both name the model: give one');
  const paths = referenceModelPaths();
  const session = await InferenceSession.create(
    values.model ??
      (modality === 'audio'
        ? dir
          ? dir.audioPath
          : paths.audio
        : (dir?.visionPath ?? paths.vision)) ??
      '',
  );
  const nMels = melBins(session, DEFAULT_N_MELS);
  const pre = await preprocess({
    modality,
    items: positionals.map((f) => readFileSync(f)),
    geometry: dir?.geometry ?? DEFAULT_GEOMETRY,
    ...(dir?.video ? { video: dir.video } : {}),
    minPixels: Number(values['min-pixels'] ?? dir?.minPixels ?? defaults.minPixels),
    maxPixels: Number(values['max-pixels'] ?? dir?.maxPixels ?? defaults.maxPixels),
    maxVideoFrames: 64,
    maxDecodedPixels: 2 ** 27, // EPD_MAX_DECODED_PIXELS' default
    nMels,
  });
  if (!pre.ok) throw new Error(`${pre.stage} failed for item ${pre.itemIndex}: ${pre.message}`);
  if (values.patches) {
    await session.release();
    const rows = new Uint8Array(pre.data.buffer, pre.data.byteOffset, pre.data.byteLength);
    const shape = [pre.rows, pre.data.length / pre.rows];
    writeFileSync(values.patches, Buffer.concat([npyHeader(shape, 'float32'), rows]));
    process.stdout.write(`${JSON.stringify({ shape, grids: pre.grids, tokens: pre.tokens })}\n`);
    return;
  }
  const feeds = modelInputs(
    session,
    pre.kind,
    pre.data,
    pre.grids,
    nMels,
    pre.kind === 'vision' ? (dir?.geometry.tiling?.size ?? 0) : 0,
  );
  const out = (await session.run(feeds))[session.outputNames[0]!]!;
  // Audio: the real rows of each window, as the service stages them.
  const data =
    pre.kind === 'audio'
      ? audioRows(out.data as Float32Array, out.dims, pre.windowTokens)
      : (out.data as Float32Array);
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  // [tokens, dim] for every model (a tiling tower's [tiles, tokens per tile, dim] flattened).
  const shape = [pre.tokens, Number(out.dims.at(-1))];
  if (values.npy) writeFileSync(values.npy, Buffer.concat([npyHeader(shape, 'float32'), bytes]));
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  process.stdout.write(
    `${JSON.stringify({ shape, grids: pre.grids, tokens: pre.tokens, sha256 })}\n`,
  );
  await session.release();
}

main().catch((err: unknown) => {
  process.stderr.write(`epd-embed: ${(err as Error).message}\n`);
  process.exit(1);
});
