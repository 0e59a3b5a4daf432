import { stagedEmbedding } from '../requests/testing';
import type { ReqState } from '../requests/req-state.store';
import { embeddingFrame } from './frames';

describe("an embedding's frame header", () => {
  const state = { reqId: 'r1', partIdx: 0, numParts: 1, modality: 'video' } as ReqState;

  it("carries a video's timing beside its grid, and nothing of it otherwise", () => {
    const timed = { ...stagedEmbedding(64), timing: { video_timestamps: [[0.25, 1.25]] } };
    expect(embeddingFrame(state, timed)).toMatchObject({
      req_id: 'r1',
      shape: [4, 4],
      grid_thw: [[1, 2, 2]],
      video_timestamps: [[0.25, 1.25]],
    });
    const plain = embeddingFrame(state, stagedEmbedding(64));
    expect(plain).not.toHaveProperty('video_timestamps');
    expect(plain).not.toHaveProperty('second_per_grid_ts');
  });
});
