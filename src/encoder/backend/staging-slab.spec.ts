import fc from 'fast-check';
import { type SlabSlot, StagingSlab } from './staging-slab';

describe('StagingSlab', () => {
  const open: StagingSlab[] = [];
  const slab = (bytes: number) => {
    const s = new StagingSlab(bytes);
    open.push(s);
    return s;
  };
  afterEach(() => open.splice(0).forEach((s) => s.close()));

  it('hands out aligned, disjoint slots first fit, and refuses what does not fit', () => {
    const s = slab(1024);
    const a = s.alloc(100)!;
    const b = s.alloc(64)!;
    expect([a.offset, b.offset]).toEqual([0, 128]);
    expect(s.usage.usedBytes).toBe(192);
    expect(s.alloc(1024 - 192 + 1)).toBeUndefined(); // larger than what is left
    a.drop();
    expect(s.alloc(128)!.offset).toBe(0); // the freed range first
  });

  it('merges a freed slot with both neighbours, so the whole slab is one range again', () => {
    const s = slab(640);
    const slots = [0, 1, 2, 3, 4].map(() => s.alloc(128)!);
    expect(s.alloc(1)).toBeUndefined();
    for (const i of [0, 2, 4, 1, 3]) slots[i]!.drop();
    expect(s.freeRanges).toEqual([{ offset: 0, size: 640 }]);
    expect(s.usage).toMatchObject({ usedBytes: 0, slots: 0 });
  });

  it('frees a slot only when its last holder drops it, and refuses use after that', () => {
    const s = slab(256);
    const slot = s.alloc(64)!;
    slot.hold(); // a send writing from it
    slot.drop(); // the request released meanwhile
    expect(s.usage.slots).toBe(1);
    expect(s.alloc(256)).toBeUndefined(); // its bytes are not handed out again
    slot.drop(); // the write is done
    expect([s.usage.slots, slot.freed]).toEqual([0, true]);
    expect(() => slot.hold()).toThrow(/after it was freed/);
    expect(() => slot.drop()).toThrow(/more often than held/);
  });

  it('views a slot in the staging dtype, on memory another thread can write', () => {
    const s = slab(256);
    const f32 = s.alloc(16)!;
    const f16 = s.alloc(8)!;
    expect(f32.view('float32')).toHaveLength(4);
    expect(f16.view('bfloat16')).toHaveLength(4);
    expect(f32.view('float32').buffer).toBeInstanceOf(SharedArrayBuffer);
    new Float32Array(s.buffer, f32.offset, 4).set([1, 2, 3, 4]);
    expect([...f32.view('float32')]).toEqual([1, 2, 3, 4]);
  });

  it('reports its size and use, and hands out nothing once closed', () => {
    const s = slab(1024);
    const slot = s.alloc(10)!;
    expect(s.usage).toEqual({ capacityBytes: 1024, usedBytes: 64, slots: 1 });
    s.close();
    expect(s.alloc(10)).toBeUndefined();
    slot.drop(); // a slot held at close stays valid until dropped
    expect(s.usage).toEqual({ capacityBytes: 1024, usedBytes: 0, slots: 0 });
  });

  it('keeps slots disjoint and inside the slab, and drains to one free range (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ alloc: fc.integer({ min: 1, max: 3000 }) }),
            fc.record({ drop: fc.nat() }),
          ),
          { maxLength: 200 },
        ),
        (ops) => {
          const s = new StagingSlab(16 * 1024);
          const live: SlabSlot[] = [];
          for (const op of ops) {
            if ('alloc' in op) {
              const slot = s.alloc(op.alloc);
              if (slot) live.push(slot);
            } else if (live.length > 0) {
              live.splice(op.drop % live.length, 1)[0]!.drop();
            }
            const spans = live
              .map((l) => [l.offset, l.offset + Math.ceil(l.bytes / 64) * 64] as const)
              .sort((a, b) => a[0] - b[0]);
            spans.forEach(([start, end], i) => {
              expect(start % 64).toBe(0);
              expect(end).toBeLessThanOrEqual(s.capacity);
              if (i > 0) expect(start).toBeGreaterThanOrEqual(spans[i - 1]![1]);
            });
            const free = s.freeRanges.reduce((n, r) => n + r.size, 0);
            expect(free + s.usage.usedBytes).toBe(s.capacity);
          }
          live.splice(0).forEach((l) => l.drop());
          expect(s.freeRanges).toEqual([{ offset: 0, size: s.capacity }]);
          s.close();
        },
      ),
      { numRuns: 200 },
    );
  });
});
