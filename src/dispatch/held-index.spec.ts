import { HeldIndex } from './held-index';

const meta = { embedding_size: 4, embedding_len: 1, embedding_dim: 1 };

describe('HeldIndex', () => {
  it('adds staged records, removes failed and deleted ones, and hands over a dead pid once', () => {
    const index = new HeldIndex(1000);
    index.record(7, { reqId: 'a', metadata: meta }, 0);
    index.record(7, { reqId: 'b', metadata: meta }, 1);
    index.record(8, { reqId: 'c', metadata: meta }, 2);
    index.record(7, { reqId: 'b', metadata: { error: 'boom' } }, 3);
    index.remove(8, 'c');
    expect(index.take(7)).toEqual(['a']);
    expect(index.take(7)).toEqual([]);
    expect(index.size).toBe(0);
  });

  it('drops entries past the TTL as new ones come: bounded even if deletes are missed', () => {
    const index = new HeldIndex(100);
    for (let i = 0; i < 1000; i++) index.record(7, { reqId: `r${i}`, metadata: meta }, i);
    expect(index.size).toBe(100);
    expect(index.take(7)[0]).toBe('r900');
  });
});
