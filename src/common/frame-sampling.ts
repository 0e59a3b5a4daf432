/**
 * Which frames of a video request are kept: `max` sampled evenly from `total` (all of them
 * when there are few), by index in the order the caller sent them. The preprocessing keeps
 * these frames (EPD_MAX_VIDEO_FRAMES), and the video's timing (encoder/video-timing.ts)
 * stamps them by the same indices.
 */
export function sampleIndices(total: number, max: number): number[] {
  if (total <= max) return Array.from({ length: total }, (_, i) => i);
  return Array.from({ length: max }, (_, i) => Math.floor((i * total) / max));
}
