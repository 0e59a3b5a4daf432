import { digestOf, objectMetadata, rowsOfObject, type StoredRows } from './object-layout';

const rows = (dtype: 'float32' | 'bfloat16' = 'float32'): StoredRows => {
  const data =
    dtype === 'float32'
      ? Float32Array.from({ length: 24 }, (_, i) => i / 7)
      : Uint16Array.from({ length: 24 }, (_, i) => 0x3f80 + i);
  return { data, tokens: 6, dim: 4, dtype, grid: [[1, 2, 3]], bytes: data.byteLength };
};
const bytesOf = (r: StoredRows) =>
  new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength).slice();

describe('object store tier: what an object must carry to be served', () => {
  it('reads back the rows it wrote, in their dtype, as a copy of its own', () => {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const r = rows(dtype);
      const bytes = bytesOf(r);
      const back = rowsOfObject(bytes, objectMetadata(r, digestOf(bytesOf(r))), dtype)!;
      expect(back).toMatchObject({ tokens: 6, dim: 4, dtype, grid: [[1, 2, 3]], bytes: r.bytes });
      expect([...back.data]).toEqual([...r.data]);
      bytes[0] = 0; // the caller's buffer is not the entry's
      expect(back.data[0]).toBe(r.data[0]);
    }
  });

  it('refuses a flipped byte, a truncated object, another dtype, another layout, or no metadata', () => {
    const r = rows();
    const meta = objectMetadata(r, digestOf(bytesOf(r)));
    const flipped = bytesOf(r);
    flipped[5] = flipped[5]! ^ 0x01;
    expect(rowsOfObject(flipped, meta, 'float32')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r).subarray(0, 92), meta, 'float32')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r), meta, 'bfloat16')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r), { ...meta, layout: '0' }, 'float32')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r), { ...meta, tokens: '5' }, 'float32')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r), { ...meta, grid: '{' }, 'float32')).toBeUndefined();
    expect(rowsOfObject(bytesOf(r), undefined, 'float32')).toBeUndefined();
  });

  it("carries a handed-off video's timing, and refuses one that is not a timing", () => {
    const timed = { ...rows(), timing: { video_timestamps: [[0.25, 1.25]] } };
    const meta = objectMetadata(timed, digestOf(bytesOf(timed)));
    expect(rowsOfObject(bytesOf(timed), meta, 'float32')!.timing).toEqual({
      video_timestamps: [[0.25, 1.25]],
    });
    const plain = rowsOfObject(
      bytesOf(timed),
      objectMetadata(rows(), digestOf(bytesOf(timed))),
      'float32',
    )!;
    expect(plain.timing).toBeUndefined();
    for (const bad of ['{', '"x"', '{"second_per_grid_ts":["1"]}', '{"video_timestamps":[1]}'])
      expect(rowsOfObject(bytesOf(timed), { ...meta, timing: bad }, 'float32')).toBeUndefined();
  });
});
