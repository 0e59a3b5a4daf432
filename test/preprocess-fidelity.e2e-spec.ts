import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { projectRoot } from '../src/common/fs/project-root';

/**
 * Our image preprocessing against a port of transformers' Qwen2VLImageProcessor slow
 * path (read from huggingface/transformers at commit cb0fc56f; the port is
 * test/interop/qwen2vl_reference.py, run with Debian's Python and Pillow): same grid, same patch layout, and pixel values within the issue's targets, on
 * images that upscale, shrink, both at once, and in every colour form a client sends.
 * Twice: with Qwen2-VL's values (14-pixel patches, CLIP mean/std, the service's default
 * min/max pixels), and with Qwen3-VL-4B-Instruct's checkpoint configuration of the same
 * processor (models/qwen3-vl-4b-reference/preprocessor_config.json: 16-pixel patches,
 * mean/std 0.5, 65,536–16,777,216 pixels), read by both sides from that file.
 */
const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const MIN_PIXELS = 3136;
const MAX_PIXELS = 1003520;
const QWEN3_VL_DIR = join(projectRoot(), 'models', 'qwen3-vl-4b-reference');
const dir = mkdtempSync(join(tmpdir(), 'epd-fidelity-'));

/**
 * Every case spawns our CLI and then the Python port, each a process that starts, loads
 * its libraries and exits: one after the other, the suite kept one core busy for about 70
 * s, mostly in start-ups. Each case's pair therefore runs as soon as the file is loaded,
 * as many cases at once as there are cores (two here), and each test awaits its own case
 * and asserts what it asserted before. A failed case fails its own test only.
 */
const execFileAsync = promisify(execFile);
const AT_ONCE = Math.max(1, Math.min(2, availableParallelism()));
let running = 0;
const waiting: (() => void)[] = [];
const started: Promise<unknown>[] = [];
function soon<T>(task: () => Promise<T>): Promise<T> {
  const result = (async () => {
    if (running >= AT_ONCE) await new Promise<void>((go) => waiting.push(go));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  })();
  // Settled before the directory goes; a rejection is its test's to report.
  started.push(result.catch(() => undefined));
  return result;
}

// The inputs and both sides' rows (about 1.4 GB over the whole corpus): gone with this file,
// whatever fails, once every case has ended. Left behind, 37 runs' worth filled the disk
// enough that JetStream refused a benchmark's buckets ("insufficient storage resources
// available").
afterAll(async () => {
  await Promise.allSettled(started);
  rmSync(dir, { recursive: true, force: true });
});

/** A Python port's JSON output. */
async function python<T>(args: string[]): Promise<T> {
  const { stdout } = await execFileAsync(PYTHON, args, { maxBuffer: 16 * 1024 * 1024 });
  return JSON.parse(stdout) as T;
}

/** What the epd-embed CLI reports of the rows it wrote. */
interface Patches {
  shape: number[];
  grids: number[][];
  tokens: number;
}

/**
 * Our preprocessing as built (dist/), run by the epd-embed CLI in its own process (the code
 * the worker threads run, outside Jest's realm, where typed-array loops that call Math
 * builtins are not optimised): the rows of `files` written to `out`, and its JSON report.
 */
async function ourPatches(files: string[], args: string[], out: string): Promise<Patches> {
  const { stdout } = await execFileAsync(
    process.execPath,
    ['dist/cli/embed.js', ...files, ...args, '--patches', out],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as Patches;
}

/** A family's configuration of the processor, as each side is told it. */
interface Family {
  /** epd-embed's arguments (the service's preprocessing, as built). */
  ours: string[];
  /** The Python port's arguments before OURS.npy, then its MIN and MAX pixels. */
  reference: string[];
  pixels: [number, number];
  patchDim: number;
}
const QWEN2_VL: Family = {
  ours: ['--min-pixels', String(MIN_PIXELS), '--max-pixels', String(MAX_PIXELS)],
  reference: [],
  pixels: [MIN_PIXELS, MAX_PIXELS],
  patchDim: 1176,
};
function qwen3Vl(): Family {
  const pre = JSON.parse(readFileSync(join(QWEN3_VL_DIR, 'preprocessor_config.json'), 'utf8')) as {
    size: { shortest_edge: number; longest_edge: number };
  };
  return {
    ours: ['--model-dir', QWEN3_VL_DIR],
    reference: ['--config', join(QWEN3_VL_DIR, 'preprocessor_config.json')],
    pixels: [pre.size.shortest_edge, pre.size.longest_edge],
    patchDim: 1536,
  };
}

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

/** Both sides' patches of one image (started by `soon`; asserted by `checked`). */
interface Compared {
  pre: Patches;
  diff: Diff;
  family: Family;
}

async function compare(name: string, file: Buffer, family: Family = QWEN2_VL): Promise<Compared> {
  const path = join(dir, name);
  writeFileSync(path, file);
  const ours = join(dir, `${name}.npy`);
  const pre = await ourPatches([path], family.ours, ours);
  const diff = await python<Diff>([
    'test/interop/qwen2vl_reference.py',
    ...family.reference,
    ours,
    String(family.pixels[0]),
    String(family.pixels[1]),
    path,
  ]);
  return { pre, diff, family };
}

/** Same grids and row counts on both sides; the difference, for the test's bounds. */
function checked({ pre, diff, family }: Compared): Diff {
  expect(diff.grids).toEqual(pre.grids);
  expect(pre.shape).toEqual([diff.rows[1], family.patchDim]);
  expect(diff.rows[0]).toBe(diff.rows[1]);
  return diff;
}

/** The targets, in normalised units. */
function expectResizedWithinTargets(d: Pick<Diff, 'max' | 'mean' | 'p999'>): void {
  expect(d.max).toBeLessThanOrEqual(0.4);
  expect(d.mean).toBeLessThanOrEqual(0.015);
  expect(d.p999).toBeLessThanOrEqual(0.2);
}

/**
 * The corpus. 'identical': no resize, or any side grows (our WebAssembly port of Pillow's
 * resample): bit for bit the reference's values. 'shrunk': both sides shrink (libvips'
 * reduce, a third of the cost on a large photo): within the issue's targets for resized
 * images. (With Qwen2-VL's values; other bounds resize other ways, see qwen3 below.)
 */
const CASES: [string, () => Promise<Buffer>, 'identical' | 'shrunk'][] = [
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

describe("image preprocessing matches a port of transformers' Qwen2VLImageProcessor slow path, read at commit cb0fc56f (Pillow)", () => {
  const stats: string[] = [];
  afterAll(() => {
    // The per-case statistics, for the record (docs/encoding.md points here for them).
    process.stdout.write(`max / mean / p99.9 |diff| vs the reference:\n${stats.join('\n')}\n`);
  });

  const cases = new Map(
    CASES.map(([name, make]) => [
      name,
      soon(async () => compare(name.replace(/\W+/g, '_'), await make())),
    ]),
  );
  it.each(CASES)('%s', async (name, _make, kind) => {
    const d = checked(await cases.get(name)!);
    stats.push(
      `  ${name}: ${d.max.toExponential(2)} / ${d.mean.toExponential(2)} / ${d.p999.toExponential(2)}`,
    );
    if (kind === 'identical') expect(d.max).toBe(0);
    else expectResizedWithinTargets(d);
  });
});

describe("Qwen2.5-VL's image processor is Qwen2-VL's: the pass above is its fidelity suite too", () => {
  it("its checkpoint's preprocessor_config.json states exactly the values that pass runs with", () => {
    const pre = JSON.parse(
      readFileSync(
        join(projectRoot(), 'models', 'qwen2.5-vl-3b-reference', 'preprocessor_config.json'),
        'utf8',
      ),
    ) as Record<string, unknown>;
    expect(pre).toMatchObject({
      patch_size: 14,
      merge_size: 2,
      temporal_patch_size: 2,
      image_mean: [0.48145466, 0.4578275, 0.40821073],
      image_std: [0.26862954, 0.26130258, 0.27577711],
      image_processor_type: 'Qwen2VLImageProcessor',
    });
    // Its max_pixels is the checkpoint's (12,845,056); the pass above runs the service's
    // default bound (1,003,520), which covers shrinking; the same code path either way.
    expect(pre.min_pixels).toBe(MIN_PIXELS);
  });
});

describe("image preprocessing matches the same port configured by Qwen3-VL-4B-Instruct's preprocessor_config.json (16-pixel patches, mean/std 0.5)", () => {
  const family = qwen3Vl();
  const stats: string[] = [];
  afterAll(() => {
    process.stdout.write(
      `Qwen3-VL: max / mean / p99.9 |diff| vs the reference:\n${stats.join('\n')}\n`,
    );
  });

  // The same corpus under this checkpoint's bounds (at least 65,536 pixels, so the small
  // images grow): which path a case takes follows from its size and the grid, by the
  // worker's rule (libvips when no side grows, the exact resampler otherwise).
  const cases = new Map(
    CASES.map(([name, make]) => [
      name,
      soon(async () => {
        const file = await make();
        return { file, compared: await compare(`q3_${name.replace(/\W+/g, '_')}`, file, family) };
      }),
    ]),
  );
  it.each(CASES)('%s', async (name) => {
    const { file, compared } = await cases.get(name)!;
    const d = checked(compared);
    const meta = await sharp(file).metadata();
    const turned = (meta.orientation ?? 1) >= 5;
    const [srcH, srcW] = turned ? [meta.width, meta.height] : [meta.height, meta.width];
    const [, gh, gw] = d.grids[0]!;
    const [h, w] = [gh! * 16, gw! * 16];
    stats.push(
      `  ${name} → ${w}x${h}: ${d.max.toExponential(2)} / ${d.mean.toExponential(2)} / ${d.p999.toExponential(2)}`,
    );
    const shrunk = h <= srcH && w <= srcW && (h < srcH || w < srcW);
    if (shrunk) expectResizedWithinTargets(d);
    else expect(d.max).toBe(0);
  });
});

const INTERNVL_DIR = join(projectRoot(), 'models', 'internvl3-1b-reference');

interface TiledDiff {
  tiles: number[];
  canvases: [number, number][];
  rows: [number, number];
  max: number;
  mean: number;
  p999: number;
}

/** Does our resize of `src` to `to` take libvips' reduce (both sides shrink), as the worker decides? */
const reduces = (src: [number, number], to: [number, number]) =>
  to[0] <= src[0] && to[1] <= src[1] && (to[0] < src[0] || to[1] < src[1]);

describe("InternVL tiling matches a port of transformers' GotOcr2ImageProcessor as InternVLProcessor runs it, read at commit 0b97ca8d (Pillow)", () => {
  const stats: string[] = [];
  afterAll(() => {
    process.stdout.write(
      `InternVL: tiles, max / mean / p99.9 |diff| vs the reference:\n${stats.join('\n')}\n`,
    );
  });

  // The same corpus: each image's tile arrangement, tile count and grid must be the
  // reference's; the tiles are bit for bit the reference's when neither resize (to the
  // canvas, and the thumbnail to one tile) shrinks both sides, else within the targets.
  // Plus squares on each side of the tie rule (every n×n arrangement is as close as 1×1;
  // the larger wins while the image's area exceeds half of it: 900² → 2×2, 1200² → 3×3).
  const TIED: [string, () => Promise<Buffer>, string][] = [
    ['tie square 900x900', async () => (await photo(900, 900)).png().toBuffer(), 'shrunk'],
    ['tie square 1200x1200', async () => (await photo(1200, 1200)).png().toBuffer(), 'shrunk'],
  ];
  const cases = new Map(
    [...CASES, ...TIED].map(([name, make]) => [
      name,
      soon(async () => {
        const file = await make();
        const base = `ivl_${name.replace(/\W+/g, '_')}`;
        const path = join(dir, base);
        writeFileSync(path, file);
        const ours = join(dir, `${base}.npy`);
        const pre = await ourPatches([path], ['--model-dir', INTERNVL_DIR], ours);
        const d = await python<TiledDiff>([
          'test/interop/internvl_reference.py',
          '--config',
          join(INTERNVL_DIR, 'preprocessor_config.json'),
          ours,
          path,
        ]);
        return { file, pre, d };
      }),
    ]),
  );
  it.each([...CASES, ...TIED])('%s', async (name) => {
    const { file, pre, d } = await cases.get(name)!;
    const tiles = d.tiles[0]!;
    expect(d.rows).toEqual([tiles, tiles]);
    expect(pre.shape).toEqual([tiles, 3 * 448 * 448]);
    expect(pre.grids).toEqual([[tiles, 32, 32]]);
    expect(pre.tokens).toBe(tiles * 256);
    const meta = await sharp(file).metadata();
    const turned = (meta.orientation ?? 1) >= 5;
    const src: [number, number] = turned ? [meta.height, meta.width] : [meta.width, meta.height];
    const [cols, rows] = d.canvases[0]!;
    const shrunk =
      reduces(src, [cols * 448, rows * 448]) || (tiles > 1 && reduces(src, [448, 448]));
    stats.push(
      `  ${name}: ${cols}x${rows} + ${tiles - cols * rows} thumbnail, ${d.max.toExponential(2)} / ${d.mean.toExponential(2)} / ${d.p999.toExponential(2)}`,
    );
    if (shrunk) expectResizedWithinTargets(d);
    else expect(d.max).toBe(0);
  });
});

describe("Qwen3-VL video matches a port of transformers' Qwen3VLVideoProcessor, read at commit 04e7e5e6, configured by the checkpoint's video_preprocessor_config.json (Pillow's resize)", () => {
  const videoConfig = join(QWEN3_VL_DIR, 'video_preprocessor_config.json');
  const stats: string[] = [];
  afterAll(() => {
    process.stdout.write(`Qwen3-VL video: grid, max / mean / p99.9 |diff|:\n${stats.join('\n')}\n`);
  });

  interface VideoDiff {
    grid?: number[];
    rows?: number[];
    max: number;
    mean: number;
    p999: number;
    error?: string;
  }

  /** Our patches (the CLI, as built; or why it refused) and the port's, for the same frames. */
  async function compareVideo(name: string, frames: Buffer[]) {
    const paths = frames.map((f, i) => {
      const path = join(dir, `q3v_${name}_${i}.png`);
      writeFileSync(path, f);
      return path;
    });
    const ours = join(dir, `q3v_${name}.npy`);
    let pre: Patches | undefined;
    let refused = '';
    try {
      pre = await ourPatches(paths, ['--modality', 'video', '--model-dir', QWEN3_VL_DIR], ours);
    } catch (err) {
      refused = String((err as { stderr?: string }).stderr ?? err);
    }
    const ref = await python<VideoDiff>([
      'test/interop/qwen3vl_video_reference.py',
      videoConfig,
      ours,
      ...paths,
    ]);
    return { pre, refused, ref };
  }

  const frames = async (n: number, make: () => Promise<sharp.Sharp>) =>
    Promise.all(Array.from({ length: n }, async () => (await make()).png().toBuffer()));

  const VIDEOS = [
    // [name, frames, width, height, what the resize does]
    ['4 frames 640x480 (the grid as it is)', 4, 640, 480, 'identical'],
    ['3 frames 333x517 (odd: the last repeated)', 3, 333, 517, 'shrunk'],
    // Over the video processor's bounds (25,165,824 pixels over all frames): 672×1216 a
    // frame, where the image processor's (16,777,216 an image) would keep 736×1280.
    ['30 frames 1280x720 (over the bounds: every frame counts)', 30, 1280, 720, 'shrunk'],
    ['2 frames 20x30 (a side under 32: scaled up first)', 2, 20, 30, 'identical'],
  ] as const;
  const cases = new Map(
    VIDEOS.map(([name, n, w, h]) => [
      name,
      soon(async () =>
        compareVideo(
          name.replace(/\W+/g, '_'),
          await frames(n, () => (n === 4 ? Promise.resolve(noise(w, h, 3)) : photo(w, h))),
        ),
      ),
    ]),
  );
  const single = soon(async () => compareVideo('one', await frames(1, () => photo(64, 64))));

  it.each(VIDEOS)('%s', async (name, n, _w, _h, kind) => {
    const { pre, ref } = await cases.get(name)!;
    expect(pre).toBeDefined();
    expect(pre!.grids).toEqual([ref.grid]);
    expect(ref.rows![0]).toBe(ref.rows![1]);
    if (n === 30) expect(ref.grid).toEqual([15, 42, 76]);
    stats.push(
      `  ${name}: ${JSON.stringify(ref.grid)}, ${ref.max.toExponential(2)} / ${ref.mean.toExponential(2)} / ${ref.p999.toExponential(2)}`,
    );
    if (kind === 'identical') expect(ref.max).toBe(0);
    else expectResizedWithinTargets(ref);
  });

  it('one frame is refused by both: fewer than the temporal factor', async () => {
    const { pre, refused, ref } = await single;
    expect(pre).toBeUndefined();
    expect(refused).toContain('a video needs at least 2 frames here, it has 1');
    expect(ref.error).toContain('must be larger than temporal_factor:2');
  });
});

describe("InternVL video matches a port of transformers' InternVLVideoProcessor, read at commit 01841b34, configured by the checkpoint's video_preprocessor_config.json (Pillow's resize)", () => {
  const videoConfig = join(INTERNVL_DIR, 'video_preprocessor_config.json');

  const VIDEOS = [
    ['3 frames 640x480 (each shrunk to one tile)', 3, 640, 480, 'shrunk'],
    ['2 frames 300x200 (each grown to one tile)', 2, 300, 200, 'identical'],
  ] as const;
  const cases = new Map(
    VIDEOS.map(([name, n, w, h]) => [
      name,
      soon(async () => {
        const paths = await Promise.all(
          Array.from({ length: n }, async (_, i) => {
            const path = join(dir, `ivlv_${name.replace(/\W+/g, '_')}_${i}.png`);
            writeFileSync(path, await (await photo(w, h)).png().toBuffer());
            return path;
          }),
        );
        const ours = join(dir, `ivlv_${name.replace(/\W+/g, '_')}.npy`);
        const pre = await ourPatches(
          paths,
          ['--modality', 'video', '--model-dir', INTERNVL_DIR],
          ours,
        );
        const d = await python<TiledDiff>([
          'test/interop/internvl_reference.py',
          '--video',
          videoConfig,
          ours,
          ...paths,
        ]);
        return { pre, d };
      }),
    ]),
  );

  it.each(VIDEOS)('%s', async (name, n, _w, _h, kind) => {
    const { pre, d } = await cases.get(name)!;
    // One tile a frame: the grid [frames, 32, 32], 256 tokens a frame.
    expect(pre.grids).toEqual([[n, 32, 32]]);
    expect(pre.tokens).toBe(n * 256);
    expect(d.rows).toEqual([n, n]);
    if (kind === 'identical') expect(d.max).toBe(0);
    else expectResizedWithinTargets(d);
  });
});
