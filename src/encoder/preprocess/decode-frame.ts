import sharp from 'sharp';
import { loadBicubicResampler } from './resample';

/**
 * Decoding for the preprocessing threads: a file's displayed size, and one frame's RGB bytes
 * resized as the reference processors resize (Pillow's bicubic). `StageError` says which
 * stage failed for which item (400 "Error while loading data" or "Failed to process mm items").
 */
export class StageError extends Error {
  constructor(
    readonly stage: 'load' | 'process',
    readonly itemIndex: number,
    message: string,
  ) {
    super(message);
  }
}

export interface Decoded {
  width: number;
  height: number;
  frames: number;
}

/** Width/height as displayed, i.e. after EXIF orientation. */
export async function probe(buf: Uint8Array, index: number, animated: boolean): Promise<Decoded> {
  let meta: sharp.Metadata;
  try {
    meta = await sharp(buf, { animated }).metadata();
  } catch (err) {
    throw new StageError('load', index, (err as Error).message);
  }
  const frames = animated ? (meta.pages ?? 1) : 1;
  const rawHeight = animated && meta.pageHeight ? meta.pageHeight : (meta.height ?? 0);
  const rawWidth = meta.width ?? 0;
  const swap = (meta.orientation ?? 1) >= 5;
  return { width: swap ? rawHeight : rawWidth, height: swap ? rawWidth : rawHeight, frames };
}

/**
 * RGB bytes of one frame (`page` of an animated image), EXIF-oriented, alpha ignored
 * (the stored colour is kept, as transformers' convert("RGB") does, with or without a
 * resize), then resized to h × w with Pillow's bicubic (resample.ts), the resize the
 * reference processor uses. libvips decodes; it does not resize, because its upscale
 * samples half a pixel off Pillow's grid. One page at a time: a 260-frame GIF used to be
 * decoded whole, then sampled down to EPD_MAX_VIDEO_FRAMES.
 */
export async function rgbFrame(
  buf: Uint8Array,
  index: number,
  page: number,
  h: number,
  w: number,
  limitInputPixels: number,
): Promise<Uint8Array> {
  let decoded: { data: Buffer; info: sharp.OutputInfo };
  try {
    decoded = await sharp(buf, { page, pages: 1, limitInputPixels })
      .rotate()
      .toColourspace('srgb')
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw new StageError('load', index, (err as Error).message);
  }
  const { data, info } = decoded;
  if (info.channels !== 3 || data.length !== info.width * info.height * 3) {
    throw new StageError(
      'load',
      index,
      `unexpected decoded layout ${info.width}x${info.height}x${info.channels}`,
    );
  }
  if (w === info.width && h === info.height) return data;
  // Shrinking on both axes, libvips' cubic reduce lands within the fidelity targets of
  // Pillow's (measured: max 0.03, mean 0.003 in normalised units) at a fifth of the
  // exact resampler's cost on a large photo; any upscaled axis goes through the exact one.
  if (w <= info.width && h <= info.height) {
    try {
      return await sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } })
        .resize(w, h, { fit: 'fill', kernel: 'cubic' })
        .raw()
        .toBuffer();
    } catch (err) {
      throw new StageError('load', index, (err as Error).message);
    }
  }
  return (await loadBicubicResampler()).resize(data, info.width, info.height, w, h);
}
