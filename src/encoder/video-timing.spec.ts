import { videoTimestamps, videoTiming } from './video-timing';

describe("a video's timing (transformers' Qwen2.5-VL and Qwen3-VL processors)", () => {
  it("Qwen3-VL: each temporal patch's first and last frame time averaged, the last frame repeated to a whole patch", () => {
    // Frames 0..3 at 2 fps: 0, 0.5 | 1, 1.5 → 0.25, 1.25.
    expect(videoTimestamps([0, 1, 2, 3], 2, 2)).toEqual([0.25, 1.25]);
    // Three frames: the third repeated → (1 + 1) / 2.
    expect(videoTimestamps([0, 1, 2], 2, 2)).toEqual([0.25, 1]);
    expect(videoTiming('qwen3-vl', 2, 4, 4, 2)).toEqual({ video_timestamps: [[0.25, 1.25]] });
    expect(videoTiming('qwen3-vl-moe', 1, 2, 2, 2)).toEqual({ video_timestamps: [[0.5]] });
    // Ten frames sent, four kept (EPD_MAX_VIDEO_FRAMES): indices 0, 2, 5, 7 → 0, 1, 2.5, 3.5 s.
    expect(videoTiming('qwen3-vl', 2, 10, 4, 2)).toEqual({ video_timestamps: [[0.5, 3]] });
  });

  it("Qwen2.5-VL: temporal_patch_size / fps seconds per grid step, at the kept frames' own rate", () => {
    expect(videoTiming('qwen2.5-vl', 2, 8, 8, 2)).toEqual({ second_per_grid_ts: [1] });
    expect(videoTiming('qwen2.5-vl', 4, 8, 8, 2)).toEqual({ second_per_grid_ts: [0.5] });
    // Four of ten kept: each kept frame stands for 2.5 sent ones.
    expect(videoTiming('qwen2.5-vl', 2, 10, 4, 2)).toEqual({ second_per_grid_ts: [2.5] });
  });

  it('other families take none', () => {
    expect(videoTiming('qwen2-vl', 2, 4, 4, 2)).toBeUndefined();
    expect(videoTiming('internvl', 2, 4, 4, 1)).toBeUndefined();
  });
});
