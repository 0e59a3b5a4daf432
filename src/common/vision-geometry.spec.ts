import { tileCount, tiledCanvas, type Tiling } from './vision-geometry';

const INTERNVL: Tiling = { size: 448, minTiles: 1, maxTiles: 12, thumbnail: true };

describe("tiledCanvas (transformers' get_optimal_tiled_canvas)", () => {
  it.each([
    // [height, width, cols, rows]
    [768, 1024, 4, 3], // 4:3 exactly
    [300, 400, 4, 3],
    [1500, 2000, 4, 3],
    [60, 3000, 12, 1], // as wide as the bounds allow
    [3000, 60, 1, 12],
    [448, 448, 1, 1], // square ties: more tiles only while the area exceeds half of theirs
    [900, 900, 2, 2],
    [1200, 1200, 3, 3],
    [10000, 10000, 3, 3], // 4×4 is beyond 12 tiles
    [200, 300, 3, 2],
    [517, 333, 2, 3],
  ])('%i×%i (h×w) → %i columns × %i rows', (h, w, cols, rows) => {
    expect(tiledCanvas(h, w, INTERNVL)).toEqual({ cols, rows });
  });

  it('keeps within min and max tiles, and adds the thumbnail only to several tiles', () => {
    expect(tiledCanvas(448, 448, { ...INTERNVL, minTiles: 4 })).toEqual({ cols: 2, rows: 2 });
    expect(tiledCanvas(768, 1024, { ...INTERNVL, maxTiles: 1 })).toEqual({ cols: 1, rows: 1 });
    expect(tileCount(1, 1, INTERNVL)).toBe(1);
    expect(tileCount(4, 3, INTERNVL)).toBe(13);
    expect(tileCount(4, 3, { ...INTERNVL, thumbnail: false })).toBe(12);
  });
});
