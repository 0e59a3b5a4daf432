import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { sharedNatsUrl, uniquePrefix } from './app';
import { startServiceProcess, type ServiceProcess } from './service-process';

/**
 * The adversarial probe's amplification inputs ("Hardening first", defect 2): a few KB of
 * request that used to cost GBs of RSS. Built here, byte for byte, so tests and the
 * memory benchmark replay exactly them.
 */

/** An 8-bit PCM WAV whose header claims `rate` Hz: 2 KB at 1 Hz is 2,000 s of audio. */
export function lyingWav(bytes: number, rate = 1): Buffer {
  const buf = Buffer.alloc(44 + bytes, 0x80);
  buf.write('RIFF', 0);
  buf.writeUInt32LE(36 + bytes, 4);
  buf.write('WAVEfmt ', 8);
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(rate, 24);
  buf.writeUInt32LE(rate, 28);
  buf.writeUInt16LE(1, 32);
  buf.writeUInt16LE(8, 34);
  buf.write('data', 36);
  buf.writeUInt32LE(bytes, 40);
  return buf;
}

/**
 * A GIF of `frames` frames on a `width × height` canvas in which every frame draws one
 * pixel: ~23 bytes a frame on the wire, a full canvas a frame once decoded
 * (260 frames of 1000×1000 is 6 KB).
 */
export function canvasBombGif(width: number, height: number, frames: number): Buffer {
  const lsd = Buffer.alloc(7);
  lsd.writeUInt16LE(width, 0);
  lsd.writeUInt16LE(height, 2);
  lsd[4] = 0x80; // global colour table of 2 entries
  const parts = [Buffer.from('GIF89a'), lsd, Buffer.from([0, 0, 0, 255, 255, 255])];
  parts.push(
    Buffer.from([0x21, 0xff, 0x0b, ...Buffer.from('NETSCAPE2.0'), 0x03, 0x01, 0x00, 0x00, 0x00]),
  );
  for (let i = 0; i < frames; i++) {
    parts.push(Buffer.from([0x21, 0xf9, 0x04, 0x00, 0x0a, 0x00, 0x00, 0x00])); // 100 ms delay
    // A 1×1 image at (0,0): LZW code size 2, codes clear(4), 0, end(5).
    parts.push(Buffer.from([0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00]));
  }
  parts.push(Buffer.from([0x3b]));
  return Buffer.concat(parts);
}

/** A flat 1000×1000 PNG: a few KB on disk, a million pixels decoded. */
export function flatPng(size = 1000): Promise<Buffer> {
  return sharp({
    create: { width: size, height: size, channels: 3, background: { r: 40, g: 90, b: 160 } },
  })
    .png({ compressionLevel: 9 })
    .toBuffer();
}

/** A JSON answer: its status, and its body (null when it is not JSON). */
export interface JsonAnswer<T> {
  status: number;
  body: T | null;
}

/**
 * The built service as its own process, with a media root holding `flat.png` (flatPng()),
 * and a JSON POST to it: the memory probes' setup. `env` adds to the service's.
 */
export async function flatPngService(env: Record<string, string> = {}): Promise<{
  svc: ServiceProcess;
  mediaRoot: string;
  post: <T>(path: string, payload: unknown) => Promise<JsonAnswer<T>>;
}> {
  const mediaRoot = mkdtempSync(join(tmpdir(), 'epd-media-'));
  writeFileSync(join(mediaRoot, 'flat.png'), await flatPng());
  const svc = await startServiceProcess({
    EPD_NATS_URL: sharedNatsUrl(),
    EPD_SUBJECT_PREFIX: uniquePrefix(),
    EPD_MEDIA_ROOT: mediaRoot,
    // MALLOC_ARENA_MAX=2, as every launcher sets it: startServiceProcess adds SERVICE_ENV.
    ...env,
  });
  const post = async <T>(path: string, payload: unknown): Promise<JsonAnswer<T>> => {
    const r = await fetch(`${svc.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    return { status: r.status, body: (await r.json().catch(() => null)) as T | null };
  };
  return { svc, mediaRoot, post };
}
