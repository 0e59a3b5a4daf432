import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';

/**
 * Our image preprocessing against a port of transformers' Qwen2VLImageProcessor slow
 * path (read from huggingface/transformers at commit cb0fc56f; the port is
 * test/interop/qwen2vl_reference.py, run with Debian's Python and Pillow): same grid, same patch layout, and pixel values within the issue's targets, on
 * images that upscale, shrink, both at once, and in every colour form a client sends.
 */
const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const MIN_PIXELS = 3136;
const MAX_PIXELS = 1003520;
const dir = mkdtempSync(join(tmpdir(), 'epd-fidelity-'));

interface Diff {
  grids: number[][];
  rows: [number, number];
  max: number;
  mean: number;
  p999: number;
}

const noise = (w: number, h: number, channels: 1 | 3 | 4) =>
  sharp(randomBytes(w * h * channels), { raw: { width: w, height: h, channels } });
/** Smooth content (a photo is mostly that) with some noise, so resizing has edges to get wrong. */
async function photo(w: number, h: number): Promise<sharp.Sharp> {
  const base = await noise(Math.ceil(w / 8), Math.ceil(h / 8), 3)
    .resize(w, h, { kernel: 'cubic' })
    .raw()
    .toBuffer();
  return sharp(base, { raw: { width: w, height: h, channels: 3 } });
}

function compare(name: string, file: Buffer): Diff {
  const path = join(dir, name);
  writeFileSync(path, file);
  // Our preprocessing as built (dist/), run by the epd-embed CLI in its own process: the
  // code the worker threads run, outside Jest's realm (where typed-array loops that call
  // Math builtins are not optimised).
  const ours = join(dir, `${name}.npy`);
  const pre = JSON.parse(
    execFileSync(process.execPath, [
      'dist/cli/embed.js',
      path,
      '--min-pixels',
      String(MIN_PIXELS),
      '--max-pixels',
      String(MAX_PIXELS),
      '--patches',
      ours,
    ]).toString(),
  ) as { shape: number[]; grids: number[][] };
  const out = execFileSync(PYTHON, [
    'test/interop/qwen2vl_reference.py',
    ours,
    String(MIN_PIXELS),
    String(MAX_PIXELS),
    path,
  ]).toString();
  const diff = JSON.parse(out) as Diff;
  expect(diff.grids).toEqual(pre.grids);
  expect(pre.shape).toEqual([diff.rows[1], 1176]);
  expect(diff.rows[0]).toBe(diff.rows[1]);
  return diff;
}

/** The targets, in normalised units. */
function expectResizedWithinTargets(d: Diff): void {
  expect(d.max).toBeLessThanOrEqual(0.4);
  expect(d.mean).toBeLessThanOrEqual(0.015);
  expect(d.p999).toBeLessThanOrEqual(0.2);
}

describe("image preprocessing matches a port of transformers' Qwen2VLImageProcessor slow path, read at commit cb0fc56f (Pillow)", () => {
  // 'identical': no resize, or any side grows (our WebAssembly port of Pillow's resample):
  // bit for bit the reference's values. 'shrunk': both sides shrink (libvips' reduce, a
  // third of the cost on a large photo): within the targets for resized images.
  const cases: [string, () => Promise<Buffer>, 'identical' | 'shrunk'][] = [
    ['exact 448x448', async () => (await photo(448, 448)).png().toBuffer(), 'identical'],
    // 1024x768 → 1036x756: width upscaled, height shrunk (the half-pixel drift case).
    ['upscale+shrink 1024x768', async () => (await photo(1024, 768)).png().toBuffer(), 'identical'],
    ['upscale 380x270', async () => (await photo(380, 270)).png().toBuffer(), 'identical'],
    ['shrink 2000x1500', async () => (await photo(2000, 1500)).png().toBuffer(), 'shrunk'],
    ['phone photo 4032x3024', async () => (await photo(4032, 3024)).jpeg().toBuffer(), 'shrunk'],
    ['shrink noise 1600x1200', async () => noise(1600, 1200, 3).png().toBuffer(), 'shrunk'],
    ['odd 333x517', async () => (await photo(333, 517)).png().toBuffer(), 'identical'],
    ['aspect 3000x60', async () => (await photo(3000, 60)).png().toBuffer(), 'shrunk'],
    ['below min_pixels 40x50', async () => (await photo(40, 50)).png().toBuffer(), 'identical'],
    ['noise 517x333', async () => noise(517, 333, 3).png().toBuffer(), 'identical'],
    [
      'grayscale 300x200',
      async () => (await photo(300, 200)).grayscale().png().toBuffer(),
      'identical',
    ],
    [
      'rgba 300x200 (alpha ignored, stored colour kept)',
      async () => noise(300, 200, 4).png().toBuffer(),
      'identical',
    ],
    ['rgba exact 280x280', async () => noise(280, 280, 4).png().toBuffer(), 'identical'],
    [
      'palette 300x200',
      async () => (await photo(300, 200)).png({ palette: true }).toBuffer(),
      'identical',
    ],
    [
      'exif-rotated jpeg 400x300',
      async () =>
        (await photo(400, 300)).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer(),
      'identical',
    ],
    [
      '16-bit png 300x200',
      async () =>
        sharp(randomBytes(300 * 200 * 3 * 2), {
          raw: { width: 300, height: 200, channels: 3, premultiplied: false },
        })
          .toColourspace('rgb16')
          .png()
          .toBuffer(),
      'identical',
    ],
  ];

  const stats: string[] = [];
  afterAll(() => {
    // The per-case statistics, for the record (docs/encoding.md points here for them).
    process.stdout.write(`max / mean / p99.9 |diff| vs the reference:\n${stats.join('\n')}\n`);
  });

  it.each(cases)('%s', async (name, make, kind) => {
    const d = compare(name.replace(/\W+/g, '_'), await make());
    stats.push(
      `  ${name}: ${d.max.toExponential(2)} / ${d.mean.toExponential(2)} / ${d.p999.toExponential(2)}`,
    );
    if (kind === 'identical') expect(d.max).toBe(0);
    else expectResizedWithinTargets(d);
  });
});
