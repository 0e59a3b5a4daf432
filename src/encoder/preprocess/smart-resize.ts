export const MAX_ASPECT_RATIO = 200;

/** Python's round(): half to even. Qwen2-VL's smart_resize relies on it (70/28 = 2.5 → 2). */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

export class SmartResizeError extends Error {}

/**
 * The Qwen-VL processors' smart_resize (transformers' image_processing_qwen2_vl): each side
 * rounded to a multiple of `factor` (patch × merge: 28, or 32 for Qwen3-VL), aspect ratio
 * kept, total pixels clamped to [minPixels, maxPixels]. Returns [height, width].
 */
export function smartResize(
  height: number,
  width: number,
  minPixels: number,
  maxPixels: number,
  factor: number,
): [number, number] {
  if (height <= 0 || width <= 0)
    throw new SmartResizeError(`invalid image size ${width}x${height}`);
  checkAspect(height, width);
  return fit(height, width, factor, minPixels, maxPixels, 1, 1);
}

function checkAspect(height: number, width: number): void {
  const ratio = Math.max(height, width) / Math.min(height, width);
  if (ratio > MAX_ASPECT_RATIO)
    throw new SmartResizeError(
      `absolute aspect ratio must be smaller than ${MAX_ASPECT_RATIO}, got ${ratio}`,
    );
}

/**
 * Both smart resizes' rounding: each side to the nearest multiple of `factor` (half to
 * even), then, if `t` such frames fall outside the bounds, both sides scaled by the same
 * β (computed over `frames` frames of the size given) and rounded down (too large) or up
 * (too small). An image is one frame, `t` and `frames` 1.
 */
function fit(
  height: number,
  width: number,
  factor: number,
  minPixels: number,
  maxPixels: number,
  t: number,
  frames: number,
): [number, number] {
  let h = roundHalfEven(height / factor) * factor;
  let w = roundHalfEven(width / factor) * factor;
  if (t * h * w > maxPixels) {
    const beta = Math.sqrt((frames * height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (t * h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (frames * height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

/**
 * Qwen3-VL's video smart resize (transformers' video_processing_qwen3_vl): as the image's,
 * but the pixel bounds count every frame (`t_bar × h × w` against the video processor's
 * `size`, with `t_bar` the frame count rounded half-even to the temporal factor), and a
 * side under `factor` first scales the frame up (truncating, as `int()` does). Fewer frames
 * than the temporal factor is an error, as there. Returns [height, width].
 */
export function videoSmartResize(
  frames: number,
  height: number,
  width: number,
  temporalFactor: number,
  factor: number,
  minPixels: number,
  maxPixels: number,
): [number, number] {
  if (frames < temporalFactor)
    throw new SmartResizeError(
      `a video needs at least ${temporalFactor} frames here, it has ${frames}`,
    );
  if (height <= 0 || width <= 0)
    throw new SmartResizeError(`invalid frame size ${width}x${height}`);
  if (height < factor || width < factor) {
    const scale = Math.max(factor / height, factor / width);
    height = Math.trunc(height * scale);
    width = Math.trunc(width * scale);
  }
  checkAspect(height, width);
  const t = roundHalfEven(frames / temporalFactor) * temporalFactor;
  return fit(height, width, factor, minPixels, maxPixels, t, frames);
}

/**
 * The video processor's `cap_pixels_per_frame` (qwen-vl-utils' rule): each frame's pixels
 * at most 768 tokens' worth or an even share of `maxPixels`, and at least 1.05 ×
 * `minPixels`; the bound for all `frames` together.
 */
export function cappedVideoPixels(
  frames: number,
  factor: number,
  minPixels: number,
  maxPixels: number,
): number {
  const perFrame = Math.max(
    Math.min(768 * factor * factor, Math.floor(maxPixels / frames)),
    Math.trunc(minPixels * 1.05),
  );
  return perFrame * frames;
}
