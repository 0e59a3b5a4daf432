import { Tensor, type InferenceSession } from 'onnxruntime-node';
import { AUDIO_MEL_FRAMES, type ModelKind } from '../pipeline/model-contract';

/**
 * The feeds of one forward, by the model contract (docs/contract.md §4):
 * - vision: `pixel_values` float32 [patches, patch dim] (the patches are the grids' t·h·w;
 *   the patch dim, 1176 or 1536, follows) and, for a model that declares a second input,
 *   `grid_thw` int64 [images, 3];
 * - vision, a tiling family (`tile`: its side): `pixel_values` float32 [tiles, 3, tile,
 *   tile], the tiles being the grids' t (each grid is [tiles, side, side] in patches);
 * - audio: `input_features` float32 [windows, nMels, 3000] (Whisper log-mel windows).
 * The one place the service, the embed CLI and the benchmarks build them.
 */
export function modelInputs(
  session: Pick<InferenceSession, 'inputNames'>,
  kind: ModelKind,
  rows: Float32Array,
  grids: readonly (readonly [number, number, number])[] = [],
  nMels = 0,
  tile = 0,
): Record<string, Tensor> {
  let dims: number[];
  if (kind === 'vision' && tile > 0) {
    const tiles = grids.reduce((n, [t]) => n + t, 0);
    if (tiles === 0 || rows.length !== tiles * 3 * tile * tile)
      throw new RangeError(`${rows.length} values are not the grids' ${tiles} tiles of ${tile}²`);
    return { [session.inputNames[0]!]: new Tensor('float32', rows, [tiles, 3, tile, tile]) };
  }
  if (kind === 'vision') {
    const patches = grids.reduce((n, [t, h, w]) => n + t * h * w, 0);
    if (patches === 0 || rows.length % patches !== 0)
      throw new RangeError(`${rows.length} values do not split into the grids' ${patches} patches`);
    dims = [patches, rows.length / patches];
  } else {
    dims = [rows.length / (nMels * AUDIO_MEL_FRAMES), nMels, AUDIO_MEL_FRAMES];
  }
  const feeds: Record<string, Tensor> = {
    [session.inputNames[0]!]: new Tensor('float32', rows, dims),
  };
  const gridInput = session.inputNames[1];
  if (kind === 'vision' && gridInput) {
    const g = BigInt64Array.from(grids.flat(), (v) => BigInt(v));
    feeds[gridInput] = new Tensor('int64', g, [grids.length, 3]);
  }
  return feeds;
}

/** The mel bins an audio model takes: its input's axis 1, or the default when symbolic. */
export function melBins(
  session: Pick<InferenceSession, 'inputMetadata'>,
  fallback: number,
): number {
  const meta = session.inputMetadata[0];
  const declared = meta?.isTensor ? meta.shape[1] : undefined;
  return typeof declared === 'number' && declared > 0 ? declared : fallback;
}

/**
 * An audio model's output [windows, 750, dim] → the real rows, packed [tokens, dim]: the
 * first `windowTokens[w]` of each window (the rest cover the window's zero padding).
 * `firstWindow` skips the windows of other requests in a fused batch.
 */
export function audioRows(
  values: Float32Array,
  dims: readonly number[],
  windowTokens: readonly number[],
  firstWindow = 0,
): Float32Array {
  const perWindow = Number(dims[1]);
  const dim = Number(dims[2]);
  const tokens = windowTokens.reduce((n, t) => n + t, 0);
  const out = new Float32Array(tokens * dim);
  let o = 0;
  windowTokens.forEach((t, i) => {
    const w = firstWindow + i;
    if (t > perWindow) throw new RangeError(`window has ${perWindow} rows, ${t} expected`);
    out.set(values.subarray(w * perWindow * dim, (w * perWindow + t) * dim), o);
    o += t * dim;
  });
  return out;
}
