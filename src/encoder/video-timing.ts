import { sampleIndices } from '../common/frame-sampling';
import type { VideoTiming } from '../common/kernel';

export type { VideoTiming } from '../common/kernel';

/**
 * A video's timing for the language side (VideoTiming, common/kernel.ts):
 * - Qwen2.5-VL: `second_per_grid_ts`, seconds per temporal grid step, `temporal_patch_size
 *   / fps` (transformers' Qwen2_5_VLProcessor), at the kept frames' own rate;
 * - Qwen3-VL: `video_timestamps`, one per temporal patch: the kept frames' times (index /
 *   fps), the last repeated to a whole patch, each patch's first and last averaged
 *   (transformers' Qwen3VLProcessor._calculate_timestamps).
 * Other families take neither.
 */

/** The frame rate a video request's frames were sampled at when it does not say (SGLang's and vLLM's default). */
export const DEFAULT_VIDEO_FPS = 2;

/** Qwen3-VL's timestamps of frames at `indices` (of the frames sent, at `fps`), per temporal patch of `merge` frames. */
export function videoTimestamps(indices: readonly number[], fps: number, merge: number): number[] {
  const padded = [...indices];
  while (padded.length % merge !== 0) padded.push(padded[padded.length - 1]!);
  const times = padded.map((i) => i / fps);
  const out: number[] = [];
  for (let i = 0; i < times.length; i += merge) out.push((times[i]! + times[i + merge - 1]!) / 2);
  return out;
}

/**
 * The timing of one video request to a model of `family`: `sent` frames at `fps`, of which
 * `kept` were kept (sampled evenly, as the preprocessing samples them), `temporal` frames
 * per patch. Undefined for families that take none.
 */
/** Whether a family's position code takes a video's timing (Qwen2.5-VL, Qwen3-VL). */
export function takesTiming(family: string): boolean {
  return family === 'qwen2.5-vl' || family.startsWith('qwen3-vl');
}

export function videoTiming(
  family: string,
  fps: number,
  sent: number,
  kept: number,
  temporal: number,
): VideoTiming | undefined {
  // Frames kept of more sent are further apart: the kept ones' own rate.
  if (family === 'qwen2.5-vl') return { second_per_grid_ts: [(temporal * sent) / (kept * fps)] };
  if (family.startsWith('qwen3-vl'))
    return { video_timestamps: [videoTimestamps(sampleIndices(sent, kept), fps, temporal)] };
  return undefined;
}
