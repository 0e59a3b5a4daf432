import type { FrameHeader, WireDtype } from '../frame';
import { PyCall, PyFloat, PyGlobal, PyObject, pickle, type PyValue } from './pickle';

/**
 * SGLang's `Modality` enum (`sglang.srt.managers.schedule_batch`), its `auto()` values.
 * `current`: IMAGE, VIDEO, AUDIO, since sgl-project/sglang#21899 (2026-04-03) removed
 * MULTI_IMAGES; `legacy`: IMAGE, MULTI_IMAGES, VIDEO, AUDIO, the releases before it.
 */
export type ModalityValues = 'current' | 'legacy';
export const MODALITY_VALUES: Readonly<Record<ModalityValues, Readonly<Record<string, number>>>> = {
  current: { image: 1, video: 2, audio: 3 },
  legacy: { image: 1, video: 3, audio: 4 },
};
const MODALITY = new PyGlobal('sglang.srt.managers.schedule_batch', 'Modality');
const TORCH_TENSOR = new PyGlobal('torch', 'tensor');
const TORCH_DTYPE: Readonly<Record<WireDtype, PyGlobal>> = {
  float32: new PyGlobal('torch', 'float32'),
  float16: new PyGlobal('torch', 'float16'),
  bfloat16: new PyGlobal('torch', 'bfloat16'),
};

/** `a.b.EmbeddingData` → the GLOBAL SGLang's receiver resolves through its restricted unpickler. */
export function classGlobal(dottedPath: string): PyGlobal {
  const at = dottedPath.lastIndexOf('.');
  return new PyGlobal(dottedPath.slice(0, at), dottedPath.slice(at + 1));
}

/**
 * The grid as SGLang's receiver reads it: a `torch.tensor` of `[t, h, w]` rows for
 * images and video (it concatenates them per modality), a flat tensor of feature lengths
 * for audio (it calls `.flatten()`). Built with `torch.tensor(list)`, which the restricted
 * unpickler allows (module `torch`) and which needs no storage blobs.
 */
function gridValue(header: FrameHeader): PyValue {
  const grid = header.grid_thw;
  if (!grid || grid.length === 0) return null;
  const data: PyValue = header.modality === 'audio' ? grid.map((g) => g[0] ?? 0) : grid;
  return new PyCall(TORCH_TENSOR, [data]);
}

/**
 * Frame 0 of SGLang's ZMQ wire: a pickled `EmbeddingData` without its tensor, exactly the
 * `__dict__` that `EmbeddingData.copy_without_embedding()` has (same keys, same order):
 * req_id, num_parts, part_idx, grid_dim, modality, embedding (None), send_time, dtype
 * (a torch dtype), shape, _mr_ptr (None), error_msg, error_code (a plain int, since the
 * restricted unpickler refuses `http.HTTPStatus`), then, for a video to Qwen2.5-VL or
 * Qwen3-VL, `second_per_grid_ts` or `video_timestamps`. On error, dtype, shape and grid are
 * None and no bytes frame follows.
 */
export function embeddingDataFrame(
  header: FrameHeader,
  classPath: string,
  nowMs: number,
  values: ModalityValues = 'current',
): Buffer {
  const failed = header.error_msg !== undefined;
  const modality = header.modality ? MODALITY_VALUES[values][header.modality] : undefined;
  const state = new Map<string, PyValue>([
    ['req_id', header.req_id],
    ['num_parts', header.num_parts],
    ['part_idx', header.part_idx],
    ['grid_dim', failed ? null : gridValue(header)],
    ['modality', modality !== undefined ? new PyCall(MODALITY, [modality]) : null],
    ['embedding', null],
    ['send_time', new PyFloat(nowMs / 1000)],
    ['dtype', failed ? null : TORCH_DTYPE[header.dtype]],
    ['shape', failed ? null : header.shape],
    ['_mr_ptr', null],
    ['error_msg', header.error_msg ?? null],
    ['error_code', header.error_code ?? null],
  ]);
  // A video's timing, as SGLang's encoder sets its "video meta" attributes (one list entry
  // per video; its receiver chains them across parts): floats, as Python has them.
  if (!failed && header.second_per_grid_ts)
    state.set(
      'second_per_grid_ts',
      header.second_per_grid_ts.map((v) => new PyFloat(v)),
    );
  if (!failed && header.video_timestamps)
    state.set(
      'video_timestamps',
      header.video_timestamps.map((ts) => ts.map((v) => new PyFloat(v))),
    );
  return pickle(new PyObject(classGlobal(classPath), state));
}
