import { execFileSync } from 'node:child_process';

/**
 * float16 staging goes through ONNX Runtime's Cast (Float16Cast). It must give the bits of
 * the scalar reference, toFloat16Bits (round to nearest even; overflow to ±Inf; subnormal
 * halves; NaN stays NaN), for every kind of float32. Run on the built code in its own
 * process: onnxruntime-node cannot make float16 tensors in Jest's realm.
 */
const SCRIPT = `
const { Float16Cast } = require('./dist/encoder/backend/float16-cast');
const { toFloat16Bits } = require('./dist/encoder/backend/half-precision');
(async () => {
  const edges = [0, 1e-8, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 6.0e-5, 2 ** -14, 2 ** -14 - 2 ** -25,
    1, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504, 65519.99, 65520, 1e6, Infinity, NaN];
  // Every 4099th float32 bit pattern: all exponents, both signs, ~1M values.
  const sweep = new Uint32Array(Math.floor(2 ** 32 / 4099)).map((_, i) => i * 4099);
  const values = new Float32Array([...edges, ...edges.map((v) => -v), ...new Float32Array(sweep.buffer)]);
  const cast = await Float16Cast.create();
  const halves = await cast.convert(values);
  await cast.release();
  const bad = [];
  for (let i = 0; i < values.length; i++) {
    const ok = Number.isNaN(values[i]) ? (halves[i] & 0x7e00) === 0x7e00 : halves[i] === toFloat16Bits(values[i]);
    if (!ok) bad.push([values[i], halves[i], toFloat16Bits(values[i])]);
  }
  process.stdout.write(JSON.stringify({ n: values.length, length: halves.length, bad: bad.slice(0, 10), badCount: bad.length }));
})();
`;

describe('float16 staging through ONNX Runtime Cast (e2e, built code)', () => {
  it('gives the scalar reference bits for ~1M float32 values, edges and NaN included', () => {
    const out = JSON.parse(execFileSync(process.execPath, ['-e', SCRIPT]).toString()) as {
      n: number;
      length: number;
      bad: unknown[];
      badCount: number;
    };
    expect(out.n).toBeGreaterThan(1_000_000);
    expect(out.length).toBe(out.n);
    expect(out.bad).toEqual([]);
    expect(out.badCount).toBe(0);
  });
});
