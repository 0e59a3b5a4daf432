import { Tensor, type InferenceSession } from 'onnxruntime-node';
import { AUDIO_FRAME, PATCH_DIM, type ModelKind } from '../pipeline/model-contract';

/**
 * The feeds of one forward, by the model contract (DESIGN.md §6): packed rows as the
 * first input (`pixel_values [patches, 1176]` or `input_features [frames, 640]`) and,
 * for a vision model that declares a second input, `grid_thw` int64 `[images, 3]`.
 * The one place the service, the embed CLI and the benchmarks build them.
 */
export function modelInputs(
  session: Pick<InferenceSession, 'inputNames'>,
  kind: ModelKind,
  rows: Float32Array,
  grids: readonly (readonly [number, number, number])[] = [],
): Record<string, Tensor> {
  const width = kind === 'vision' ? PATCH_DIM : AUDIO_FRAME;
  const feeds: Record<string, Tensor> = {
    [session.inputNames[0]!]: new Tensor('float32', rows, [rows.length / width, width]),
  };
  const gridInput = session.inputNames[1];
  if (kind === 'vision' && gridInput) {
    const g = BigInt64Array.from(grids.flat(), (v) => BigInt(v));
    feeds[gridInput] = new Tensor('int64', g, [grids.length, 3]);
  }
  return feeds;
}
