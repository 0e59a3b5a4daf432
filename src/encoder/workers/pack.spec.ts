import { pack } from './pack';

describe('pack', () => {
  it('returns a single part as is, without a copy', () => {
    const only = new Float32Array([1, 2]);
    expect(pack([only])).toBe(only);
  });

  it('packs parts back to back into the buffer `into` gives, viewed at the exact length', () => {
    const scratch = new Float32Array(8).fill(9);
    const out = pack([new Float32Array([1, 2]), new Float32Array([3])], () => scratch);
    expect([...out]).toEqual([1, 2, 3]);
    expect(out.buffer).toBe(scratch.buffer);
    expect(scratch[3]).toBe(9);
  });
});
