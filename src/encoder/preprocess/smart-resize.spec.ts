import { SmartResizeError, cappedVideoPixels, videoSmartResize } from './smart-resize';

/** Qwen3-VL-4B-Instruct's video processor: factor 32, temporal 2, 4,096–25,165,824 pixels. */
const q3 = (frames: number, h: number, w: number, max = 25165824) =>
  videoSmartResize(frames, h, w, 2, 32, 4096, max);

// Every expected size here is what the Python port (test/interop/qwen3vl_video_reference.py)
// gives for the same arguments.
describe("videoSmartResize (transformers' Qwen3-VL video smart_resize)", () => {
  it('counts every frame against the bounds', () => {
    expect(q3(4, 480, 640)).toEqual([480, 640]);
    // 30 × 736 × 1280 is over 25,165,824: each frame shrinks, to 672 × 1216.
    expect(q3(30, 720, 1280)).toEqual([672, 1216]);
    // Two of them stay within: 720 / 32 = 22.5 rounds half to even, to 704.
    expect(q3(2, 720, 1280)).toEqual([704, 1280]);
  });

  it('rounds the frame count half to even for the check (3 → 4, 5 → 4), as Python does', () => {
    // 5 frames of 2048²: t_bar 4 → 4 × 2048² = 16,777,216, within; 7 → t_bar 8, over.
    expect(q3(5, 2048, 2048)).toEqual([2048, 2048]);
    expect(q3(7, 2048, 2048)[0]).toBeLessThan(2048);
  });

  it('scales a side under the factor up first (truncating), and grows to the minimum', () => {
    expect(q3(2, 30, 20)).toEqual([64, 32]);
    // 2 × 32² is under 16,384: β = √8, each side ⌈32·√8 / 32⌉ × 32 = 96.
    expect(videoSmartResize(2, 32, 32, 2, 32, 16384, 10 ** 8)).toEqual([96, 96]);
  });

  it('refuses fewer frames than the temporal factor, and extreme aspect ratios', () => {
    expect(() => q3(1, 64, 64)).toThrow(SmartResizeError);
    expect(() => q3(1, 64, 64)).toThrow('a video needs at least 2 frames here, it has 1');
    expect(() => q3(2, 32, 32 * 201)).toThrow(/aspect ratio/);
  });

  it('caps pixels per frame as qwen-vl-utils does when the checkpoint asks (cap_pixels_per_frame)', () => {
    // 768 tokens' worth (768 × 32²) a frame, unless the even share is smaller.
    expect(cappedVideoPixels(4, 32, 4096, 25165824)).toBe(4 * 768 * 1024);
    expect(cappedVideoPixels(100, 32, 4096, 25165824)).toBe(100 * 251658);
    // Never under 1.05 × the minimum a frame.
    expect(cappedVideoPixels(10_000, 32, 4096, 25165824)).toBe(10_000 * 4300);
  });
});
