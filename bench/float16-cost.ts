/**
 * Child process of encode-cost: the float16 conversion of a 999×1024 embedding, in a
 * process of its own. The service converts in its inference thread, whose heap holds
 * little; measured inside the benchmark process instead, each conversion's 2 MB output
 * also paid for collections of that process's large heap (images, sessions, outputs):
 * 1.0-1.1 core-ms there, against 0.5 here. Prints per-block core-ms (process CPU, every
 * thread, collections included) as JSON.
 *
 * Usage: node float16-cost.js <blocks> <per block>
 */
import { Float16Cast } from '../src/encoder/backend/float16-cast';

async function main() {
  const [blocks, perBlock] = process.argv.slice(2).map(Number) as [number, number];
  const values = new Float32Array(999 * 1024).map(() => Math.random() - 0.5);
  const cast = await Float16Cast.create();
  // Steady state, as the service's long-lived cast session runs: the first few dozen
  // conversions cost up to 2x while the allocator settles on reusing the output buffers.
  for (let k = 0; k < 40; k++) await cast.convert(values);
  const out: number[] = [];
  for (let b = 0; b < blocks; b++) {
    const t0 = process.cpuUsage();
    for (let k = 0; k < perBlock; k++) await cast.convert(values);
    const t = process.cpuUsage(t0);
    out.push((t.user + t.system) / 1000 / perBlock);
  }
  await cast.release();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

void main();
