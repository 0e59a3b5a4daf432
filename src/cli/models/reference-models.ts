import { onnx } from 'onnx-proto';

import { REFERENCE_DOC, REFERENCE_PRODUCER } from '../../encoder/backend/model-marker';
import {
  AUDIO_MEL_FRAMES,
  AUDIO_TOKENS_PER_WINDOW,
  DEFAULT_N_MELS,
} from '../../encoder/pipeline/model-contract';
import {
  DEFAULT_GEOMETRY,
  patchDim,
  type VisionGeometry,
} from '../../common/vision-geometry';

import { prng } from '../../common/prng';

export const REFERENCE_SEED = 20240611;
const HIDDEN = 128;

function weights(rand: () => number, rows: number, cols: number): Float32Array {
  const scale = 1 / Math.sqrt(rows);
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < out.length; i++) out[i] = (rand() * 2 - 1) * scale;
  return out;
}

function floatTensor(name: string, dims: number[], data: Float32Array): onnx.ITensorProto {
  return {
    name,
    dims,
    dataType: onnx.TensorProto.DataType.FLOAT,
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  };
}

function int64Tensor(name: string, values: number[]): onnx.ITensorProto {
  const data = new BigInt64Array(values.map((v) => BigInt(v)));
  return {
    name,
    dims: [values.length],
    dataType: onnx.TensorProto.DataType.INT64,
    rawData: new Uint8Array(data.buffer),
  };
}

function valueInfo(
  name: string,
  elemType: number,
  dims: (number | string)[],
): onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: {
          dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })),
        },
      },
    },
  };
}

const node = (opType: string, inputs: string[], outputs: string[]): onnx.INodeProto => ({
  opType,
  input: inputs,
  output: outputs,
  name: outputs[0],
});

function model(graph: onnx.IGraphProto, kind: string, dim: number): Uint8Array {
  return onnx.ModelProto.encode({
    irVersion: 8,
    producerName: REFERENCE_PRODUCER,
    producerVersion: '1',
    docString: REFERENCE_DOC,
    opsetImport: [{ domain: '', version: 17 }],
    metadataProps: [
      { key: 'epd.kind', value: kind },
      { key: 'epd.embedding_dim', value: String(dim) },
      { key: 'epd.seed', value: String(REFERENCE_SEED) },
      { key: 'epd.reference', value: 'true' },
    ],
    graph,
  }).finish();
}

/**
 * Vision tower with Qwen2-VL's slot: pixel_values [num_patches, 1176] (+ grid_thw
 * [num_images, 3]) → embeddings [num_patches / 4, dim]. Patch projection, 2×2 merge
 * (consecutive groups of 4 patches, which the preprocessor emits in merge order), then an
 * MLP to `dim`.
 */
export function buildVisionModel(dim = 1024, seed = REFERENCE_SEED): Uint8Array {
  const rand = prng(seed);
  const PATCH_DIM = patchDim(DEFAULT_GEOMETRY);
  const merge = DEFAULT_GEOMETRY.mergeSize;
  const merged = HIDDEN * merge * merge;
  const F = onnx.TensorProto.DataType.FLOAT;
  return model(
    {
      name: 'epd-reference-vision',
      input: [
        valueInfo('pixel_values', F, ['num_patches', PATCH_DIM]),
        valueInfo('grid_thw', onnx.TensorProto.DataType.INT64, ['num_images', 3]),
      ],
      output: [valueInfo('embeddings', F, ['num_tokens', dim])],
      initializer: [
        floatTensor('patch_w', [PATCH_DIM, HIDDEN], weights(rand, PATCH_DIM, HIDDEN)),
        floatTensor('patch_b', [HIDDEN], weights(rand, HIDDEN, 1)),
        int64Tensor('merge_shape', [-1, merged]),
        floatTensor('mlp1_w', [merged, dim], weights(rand, merged, dim)),
        floatTensor('mlp1_b', [dim], weights(rand, dim, 1)),
        floatTensor('mlp2_w', [dim, dim], weights(rand, dim, dim)),
        floatTensor('mlp2_b', [dim], weights(rand, dim, 1)),
      ],
      node: [
        node('MatMul', ['pixel_values', 'patch_w'], ['patch_mm']),
        node('Add', ['patch_mm', 'patch_b'], ['patch_pre']),
        node('Tanh', ['patch_pre'], ['patch']),
        node('Reshape', ['patch', 'merge_shape'], ['merged']),
        node('MatMul', ['merged', 'mlp1_w'], ['mlp1_mm']),
        node('Add', ['mlp1_mm', 'mlp1_b'], ['mlp1_pre']),
        node('Relu', ['mlp1_pre'], ['mlp1']),
        node('MatMul', ['mlp1', 'mlp2_w'], ['mlp2_mm']),
        node('Add', ['mlp2_mm', 'mlp2_b'], ['embeddings']),
      ],
    },
    'vision',
    dim,
  );
}

/** Width of the reference DeepStack tower's shared layer (kept small: the outputs are wide). */
const DEEPSTACK_HIDDEN = 256;

/**
 * Vision tower with Qwen3-VL's slot: pixel_values [num_patches, patchDim(geometry)] (+
 * grid_thw) → embeddings [num_patches / merge², out × (1 + deepstack)]: patch projection,
 * merge, one shared layer, then the merged output and `deepstack` more projections of
 * width `out` concatenated on the last dimension, as Qwen3-VL's tower hands its DeepStack
 * features on beside the main ones.
 */
export function buildDeepStackVisionModel(
  geometry: VisionGeometry,
  out: number,
  deepstack: number,
  seed = REFERENCE_SEED + 2,
): Uint8Array {
  const rand = prng(seed);
  const dimIn = patchDim(geometry);
  const merged = HIDDEN * geometry.mergeSize * geometry.mergeSize;
  const F = onnx.TensorProto.DataType.FLOAT;
  const width = out * (1 + deepstack);
  const heads = Array.from({ length: 1 + deepstack }, (_, i) => i);
  return model(
    {
      name: 'epd-reference-vision-deepstack',
      input: [
        valueInfo('pixel_values', F, ['num_patches', dimIn]),
        valueInfo('grid_thw', onnx.TensorProto.DataType.INT64, ['num_images', 3]),
      ],
      output: [valueInfo('embeddings', F, ['num_tokens', width])],
      initializer: [
        floatTensor('patch_w', [dimIn, HIDDEN], weights(rand, dimIn, HIDDEN)),
        floatTensor('patch_b', [HIDDEN], weights(rand, HIDDEN, 1)),
        int64Tensor('merge_shape', [-1, merged]),
        floatTensor('shared_w', [merged, DEEPSTACK_HIDDEN], weights(rand, merged, DEEPSTACK_HIDDEN)),
        floatTensor('shared_b', [DEEPSTACK_HIDDEN], weights(rand, DEEPSTACK_HIDDEN, 1)),
        ...heads.map((i) =>
          floatTensor(`head${i}_w`, [DEEPSTACK_HIDDEN, out], weights(rand, DEEPSTACK_HIDDEN, out)),
        ),
      ],
      node: [
        node('MatMul', ['pixel_values', 'patch_w'], ['patch_mm']),
        node('Add', ['patch_mm', 'patch_b'], ['patch_pre']),
        node('Tanh', ['patch_pre'], ['patch']),
        node('Reshape', ['patch', 'merge_shape'], ['merged']),
        node('MatMul', ['merged', 'shared_w'], ['shared_mm']),
        node('Add', ['shared_mm', 'shared_b'], ['shared_pre']),
        node('Relu', ['shared_pre'], ['shared']),
        ...heads.map((i) => node('MatMul', ['shared', `head${i}_w`], [`head${i}`])),
        {
          ...node(
            'Concat',
            heads.map((i) => `head${i}`),
            ['embeddings'],
          ),
          attribute: [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: -1 }],
        },
      ],
    },
    'vision',
    width,
  );
}

/** Width of the reference tiling tower's patch features (kept small: a tile has 1,024 patches). */
const TILE_HIDDEN = 64;

const ints = (name: string, values: number[]): onnx.IAttributeProto => ({
  name,
  type: onnx.AttributeProto.AttributeType.INTS,
  ints: values,
});

/**
 * Vision tower with InternVL's slot: pixel_values [tiles, 3, tile, tile] → embeddings [tiles,
 * tokens per tile, dim]. Each tile is cut into patch × patch squares (reshape, transpose), each
 * projected; the patch grid is pixel-shuffled by `merge` (merge² neighbouring patches per token:
 * (448 / 14)² / 4 = 256 tokens), then an MLP to `dim`, as InternVL's mlp1 projects the
 * shuffled features to the language model's width.
 */
export function buildTiledVisionModel(
  geometry: VisionGeometry,
  dim: number,
  seed = REFERENCE_SEED + 3,
): Uint8Array {
  const rand = prng(seed);
  const tile = geometry.tiling!.size;
  const p = geometry.patchSize;
  const m = geometry.mergeSize;
  const side = tile / p; // patches per tile side
  const patchIn = 3 * p * p;
  const merged = TILE_HIDDEN * m * m;
  const tokens = (side / m) ** 2;
  const F = onnx.TensorProto.DataType.FLOAT;
  return model(
    {
      name: 'epd-reference-vision-tiled',
      input: [valueInfo('pixel_values', F, ['tiles', 3, tile, tile])],
      output: [valueInfo('embeddings', F, ['tiles', tokens, dim])],
      initializer: [
        int64Tensor('split_shape', [0, 3, side, p, side, p]),
        int64Tensor('patch_shape', [0, side * side, patchIn]),
        floatTensor('patch_w', [patchIn, TILE_HIDDEN], weights(rand, patchIn, TILE_HIDDEN)),
        floatTensor('patch_b', [TILE_HIDDEN], weights(rand, TILE_HIDDEN, 1)),
        int64Tensor('grid_shape', [0, side / m, m, side / m, m, TILE_HIDDEN]),
        int64Tensor('token_shape', [0, tokens, merged]),
        floatTensor('mlp1_w', [merged, dim], weights(rand, merged, dim)),
        floatTensor('mlp1_b', [dim], weights(rand, dim, 1)),
        floatTensor('mlp2_w', [dim, dim], weights(rand, dim, dim)),
        floatTensor('mlp2_b', [dim], weights(rand, dim, 1)),
      ],
      node: [
        // [T, 3, side, p, side, p] → [T, side, side, 3, p, p]: each patch's values channel-major.
        node('Reshape', ['pixel_values', 'split_shape'], ['split']),
        { ...node('Transpose', ['split'], ['patches6']), attribute: [ints('perm', [0, 2, 4, 1, 3, 5])] },
        node('Reshape', ['patches6', 'patch_shape'], ['patches']),
        node('MatMul', ['patches', 'patch_w'], ['patch_mm']),
        node('Add', ['patch_mm', 'patch_b'], ['patch_pre']),
        node('Tanh', ['patch_pre'], ['patch']),
        // Pixel shuffle: [T, side/m, m, side/m, m, H] → [T, side/m, side/m, m, m, H].
        node('Reshape', ['patch', 'grid_shape'], ['grid']),
        { ...node('Transpose', ['grid'], ['shuffled']), attribute: [ints('perm', [0, 1, 3, 2, 4, 5])] },
        node('Reshape', ['shuffled', 'token_shape'], ['merged']),
        node('MatMul', ['merged', 'mlp1_w'], ['mlp1_mm']),
        node('Add', ['mlp1_mm', 'mlp1_b'], ['mlp1_pre']),
        node('Relu', ['mlp1_pre'], ['mlp1']),
        node('MatMul', ['mlp1', 'mlp2_w'], ['mlp2_mm']),
        node('Add', ['mlp2_mm', 'mlp2_b'], ['embeddings']),
      ],
    },
    'vision',
    dim,
  );
}

/**
 * Audio tower with Qwen2-Audio's slot: input_features [windows, 128, 3000] (Whisper
 * log-mel) → embeddings [windows, 750, dim]. Like the real tower it reduces time 4x:
 * here by grouping 4 consecutive mel frames (transpose, reshape), then a projection.
 */
export function buildAudioModel(dim = 1024, seed = REFERENCE_SEED + 1): Uint8Array {
  const rand = prng(seed);
  const F = onnx.TensorProto.DataType.FLOAT;
  const nMels = DEFAULT_N_MELS;
  const group = (AUDIO_MEL_FRAMES / AUDIO_TOKENS_PER_WINDOW) * nMels; // 4 frames × 128 mels
  return model(
    {
      name: 'epd-reference-audio',
      input: [valueInfo('input_features', F, ['windows', nMels, AUDIO_MEL_FRAMES])],
      output: [valueInfo('embeddings', F, ['windows', AUDIO_TOKENS_PER_WINDOW, dim])],
      initializer: [
        int64Tensor('group_shape', [0, AUDIO_TOKENS_PER_WINDOW, group]),
        floatTensor('frame_w', [group, dim], weights(rand, group, dim)),
        floatTensor('frame_b', [dim], weights(rand, dim, 1)),
      ],
      node: [
        { ...node('Transpose', ['input_features'], ['time_major']), attribute: [perm([0, 2, 1])] },
        node('Reshape', ['time_major', 'group_shape'], ['grouped']),
        node('MatMul', ['grouped', 'frame_w'], ['frame_mm']),
        node('Add', ['frame_mm', 'frame_b'], ['frame_pre']),
        node('Tanh', ['frame_pre'], ['embeddings']),
      ],
    },
    'audio',
    dim,
  );
}

const perm = (ints: number[]): onnx.IAttributeProto => ({
  name: 'perm',
  type: onnx.AttributeProto.AttributeType.INTS,
  ints,
});
