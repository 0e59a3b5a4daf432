import type { StagedEmbedding } from './req-state';

/** A staged float32 embedding of `bytes` bytes (dim 4), for request-state specs. */
export const stagedEmbedding = (bytes: number): StagedEmbedding => ({
  data: new Float32Array(bytes / 4),
  tokens: bytes / 16,
  dim: 4,
  dtype: 'float32',
  bytes,
  grid: [[1, 2, 2]],
});
