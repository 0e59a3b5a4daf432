import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { encodeWav } from '../../src/media/audio/wav';

/** Real images made with sharp, so every test exercises the real decoders. */
export async function image(
  width: number,
  height: number,
  format: 'png' | 'jpeg' | 'webp' = 'png',
  color = { r: 40, g: 90, b: 160 },
): Promise<Buffer> {
  const base = sharp({ create: { width, height, channels: 3, background: color } });
  return format === 'png'
    ? base.png().toBuffer()
    : format === 'jpeg'
      ? base.jpeg().toBuffer()
      : base.webp().toBuffer();
}

/** An animated GIF of `frames` frames (a video item). */
export async function animatedGif(width: number, height: number, frames: number): Promise<Buffer> {
  const pngs = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      sharp({
        create: { width, height, channels: 3, background: { r: (i * 40) % 256, g: 0, b: 0 } },
      })
        .png()
        .toBuffer(),
    ),
  );
  return sharp(pngs, { join: { animated: true } })
    .gif()
    .toBuffer();
}

/** A mono tone as a WAV file. */
export function tone(seconds: number, rate = 16000, format: 'pcm16' | 'float32' = 'pcm16'): Buffer {
  const n = Math.round(seconds * rate);
  const s = Float32Array.from(
    { length: n },
    (_, i) => 0.3 * Math.sin((2 * Math.PI * 440 * i) / rate),
  );
  return encodeWav(s, rate, format);
}

export const dataUri = (buf: Buffer, mime: string) =>
  `data:${mime};base64,${buf.toString('base64')}`;
export const sha256 = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');
