import { quantile } from './dashboard.service';

describe('quantile (histogram_quantile over two bucket readings)', () => {
  const cum = (pairs: [number, number][]) => new Map(pairs);

  it('interpolates within the bucket that holds the rank', () => {
    // 10 observations: 4 in (0, 0.001], 6 in (0.001, 0.01].
    const now = cum([
      [0.001, 4],
      [0.01, 10],
      [Infinity, 10],
    ]);
    expect(quantile(0.4, now)).toBeCloseTo(0.001);
    expect(quantile(0.7, now)).toBeCloseTo(0.001 + 0.009 * 0.5);
  });

  it('counts only what was observed since the earlier reading', () => {
    const before = cum([
      [0.001, 100],
      [0.01, 100],
      [Infinity, 100],
    ]);
    const now = cum([
      [0.001, 100],
      [0.01, 102],
      [Infinity, 102],
    ]);
    expect(quantile(0.5, now, before)).toBeGreaterThan(0.001);
    expect(quantile(0.5, before, before)).toBeNull();
  });

  it('reports the last finite bound for observations beyond it', () => {
    const now = cum([
      [1, 0],
      [Infinity, 3],
    ]);
    expect(quantile(0.99, now)).toBe(1);
  });
});
