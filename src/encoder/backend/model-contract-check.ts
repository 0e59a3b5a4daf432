import type { InferenceSession } from 'onnxruntime-node';
import {
  AUDIO_MEL_FRAMES,
  AUDIO_TOKENS_PER_WINDOW,
  type ModelKind,
} from '../pipeline/model-contract';

/** Every message starts with this, so the main thread recognises it across the worker boundary. */
export const CONTRACT_ERROR_PREFIX = 'model does not match the encoder contract';

type Metadata = readonly InferenceSession.ValueMetadata[];

const describe = (m: InferenceSession.ValueMetadata) =>
  m.isTensor ? `${m.name}: ${m.type} [${m.shape.join(', ')}]` : `${m.name}: not a tensor`;

/**
 * Checks a model's declared inputs and outputs against the contract (docs/contract.md §4), so a
 * wrong file in EPD_MODEL_PATH is refused at start-up with what was expected and what the
 * file declares, instead of failing (or worse, answering garbage) on the first request:
 * - vision: input 0 float32 `[patches, patchDim]` (1176 for 14-pixel patches, 1536 for
 *   16: the model's geometry), an optional input 1 int64 `[images, 3]` (grid_thw), output 0
 *   float32 `[tokens, dim]`;
 * - vision, a tiling family (`tiling`: InternVL): input 0 float32 `[tiles, 3, tile, tile]`, no
 *   other input, output 0 float32 `[tiles, tokens per tile, dim]` (or already `[tokens, dim]`);
 * - audio: input 0 float32 `[windows, n_mels, 3000]` (Whisper log-mel), output 0 float32
 *   `[windows, 750, dim]`.
 * Symbolic dimensions pass; a fixed one must be the contract's.
 */
export function checkModelContract(
  kind: ModelKind,
  path: string,
  inputs: Metadata,
  outputs: Metadata,
  patchDim: number,
  tiling?: { tile: number; tokensPerTile: number },
): void {
  const problems: string[] = [];
  const tensor = (
    m: InferenceSession.ValueMetadata | undefined,
    what: string,
    type: string,
    rank: number,
    fixed: Record<number, number> = {},
  ) => {
    if (!m) return problems.push(`${what} is missing`);
    if (!m.isTensor) return problems.push(`${what} ${m.name} is not a tensor`);
    if (m.type !== type) problems.push(`${what} ${m.name} is ${m.type}, expected ${type}`);
    // An empty shape means the model does not declare one: nothing to check.
    if (m.shape.length > 0 && m.shape.length !== rank)
      problems.push(`${what} ${m.name} has rank ${m.shape.length}, expected ${rank}`);
    for (const [axis, size] of Object.entries(fixed)) {
      const d = m.shape[Number(axis)];
      if (typeof d === 'number' && d > 0 && d !== size)
        problems.push(`${what} ${m.name} has ${d} on axis ${axis}, expected ${size}`);
    }
  };
  if (kind === 'vision' && tiling) {
    tensor(inputs[0], 'input 0', 'float32', 4, { 1: 3, 2: tiling.tile, 3: tiling.tile });
    const out = outputs[0];
    // [tiles, tokens per tile, dim] (InternVL's projector output), or already [tokens, dim].
    const rank = out?.isTensor && out.shape.length === 2 ? 2 : 3;
    tensor(out, 'output 0', 'float32', rank, rank === 3 ? { 1: tiling.tokensPerTile } : {});
    if (inputs.length > 1) problems.push(`it has ${inputs.length} inputs, expected 1`);
  } else if (kind === 'vision') {
    tensor(inputs[0], 'input 0', 'float32', 2, { 1: patchDim });
    if (inputs[1]) tensor(inputs[1], 'input 1 (grid_thw)', 'int64', 2, { 1: 3 });
    tensor(outputs[0], 'output 0', 'float32', 2);
  } else {
    tensor(inputs[0], 'input 0', 'float32', 3, { 2: AUDIO_MEL_FRAMES });
    tensor(outputs[0], 'output 0', 'float32', 3, { 1: AUDIO_TOKENS_PER_WINDOW });
  }
  if (!tiling && inputs.length > (kind === 'vision' ? 2 : 1))
    problems.push(`it has ${inputs.length} inputs, expected at most ${kind === 'vision' ? 2 : 1}`);
  if (problems.length === 0) return;
  const variable = kind === 'vision' ? 'EPD_MODEL_PATH' : 'EPD_AUDIO_MODEL_PATH';
  const expected = tiling
    ? `float32 [tiles, 3, ${tiling.tile}, ${tiling.tile}] → float32 [tiles, ${tiling.tokensPerTile}, dim]`
    : kind === 'vision'
      ? `float32 [patches, ${patchDim}] (+ optional int64 grid_thw [images, 3]) → float32 [tokens, dim]`
      : `float32 [windows, n_mels, ${AUDIO_MEL_FRAMES}] → float32 [windows, ${AUDIO_TOKENS_PER_WINDOW}, dim]`;
  throw new Error(
    `${CONTRACT_ERROR_PREFIX}: ${kind} model ${path} (${variable}): ${problems.join('; ')}. ` +
      `Expected ${expected}; it declares inputs {${inputs.map(describe).join('; ')}} and ` +
      `outputs {${outputs.map(describe).join('; ')}}.`,
  );
}
