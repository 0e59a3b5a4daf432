import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeWav } from '../src/media/audio/wav';

/**
 * Our audio features against a port of transformers' WhisperFeatureExtractor (its numpy
 * path, read from huggingface/transformers at commit 2b897410; the port is
 * test/interop/whisper_reference.py, run with Debian's Python): the same Whisper log-mel
 * windows within two float32 ulps at 1.0, and Qwen2-Audio's token count per window.
 * Our side runs as built, through `epd-embed --patches` (what the audio model is fed).
 */
const PYTHON = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
const dir = mkdtempSync(join(tmpdir(), 'epd-audio-fidelity-'));

/** Speech-like test audio: a few tones, an envelope, and some noise, at 16 kHz. */
function signal(seconds: number, seed: number): Float32Array {
  const n = Math.round(seconds * 16000);
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
  return Float32Array.from({ length: n }, (_, i) => {
    const t = i / 16000;
    const env = 0.5 + 0.5 * Math.sin(2 * Math.PI * 3 * t);
    return (
      env * (0.3 * Math.sin(2 * Math.PI * 220 * t) + 0.15 * Math.sin(2 * Math.PI * 1870 * t)) +
      0.02 * rand()
    );
  });
}

/** Two float32 ulps at 1.0 (2 × 2^-23). */
const MAX_DIFF = 2 * 2 ** -23;

describe("audio features match a port of transformers' WhisperFeatureExtractor, read at commit 2b897410 (Qwen2-Audio)", () => {
  const stats: string[] = [];
  afterAll(() => process.stdout.write(`max |diff| vs the reference:\n${stats.join('\n')}\n`));

  it.each([
    ['1 s', 1, 1],
    ['0.5 s', 0.5, 1],
    ['7.3 s', 7.3, 1],
    ['exactly 30 s', 30, 1],
    ['65 s (three windows)', 65, 3],
    ['silence 2 s', 0, 1],
  ])('%s', (name, seconds, windows) => {
    const samples = name.startsWith('silence') ? new Float32Array(32000) : signal(seconds, 7);
    const wav = join(dir, `${name.replace(/\W+/g, '_')}.wav`);
    writeFileSync(wav, encodeWav(samples, 16000));
    const ours = `${wav}.npy`;
    const pre = JSON.parse(
      execFileSync(process.execPath, [
        'dist/cli/embed.js',
        wav,
        '--modality',
        'audio',
        '--patches',
        ours,
      ]).toString(),
    ) as { shape: number[]; tokens: number };
    const ref = JSON.parse(
      execFileSync(PYTHON, ['test/interop/whisper_reference.py', ours, '128', wav]).toString(),
    ) as { windows: number; tokens: number[]; shape: number[]; max?: number };
    stats.push(`  ${name}: ${ref.max?.toExponential(2)}`);
    expect(ref.windows).toBe(windows);
    expect(pre.shape).toEqual([windows, 128 * 3000]);
    expect(pre.tokens).toBe(ref.tokens.reduce((a, b) => a + b, 0));
    // Two float32 ulps at 1.0: the features agree to float32 rounding, no more.
    expect(ref.max).toBeLessThanOrEqual(MAX_DIFF);
  });
});
