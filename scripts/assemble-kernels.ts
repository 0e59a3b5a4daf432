// Assembles the resampler's WebAssembly text into the binary the service loads:
// src/encoder/preprocess/resample-kernels.wat → resample-kernels.wasm (`npm run kernels`).
// The .wasm is committed and copied into dist/ by `nest build`; a unit test
// (resample.spec.ts) fails when it no longer matches the .wat.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import wabtInit from 'wabt';

async function main(): Promise<void> {
  const dir = join(process.cwd(), 'src/encoder/preprocess');
  const wabt = await wabtInit();
  const wat = readFileSync(join(dir, 'resample-kernels.wat'), 'utf8');
  const parsed = wabt.parseWat('resample-kernels.wat', wat, { simd: true });
  try {
    const { buffer } = parsed.toBinary({});
    writeFileSync(join(dir, 'resample-kernels.wasm'), buffer);
    console.log(`wrote src/encoder/preprocess/resample-kernels.wasm (${buffer.length} bytes)`);
  } finally {
    parsed.destroy();
  }
}

void main();
