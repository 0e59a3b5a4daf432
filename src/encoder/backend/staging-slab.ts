import type { SlabSlot as KernelSlot, SlabUsage, StagingDtype } from '../../common/kernel';

/** Slots start on cache-line boundaries (and so are aligned for every staging dtype). */
const ALIGN = 64;

const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

export type { SlabUsage } from '../../common/kernel';

/**
 * One staged embedding's place in the slab. Its owner (the request's state, once staged;
 * the pipeline before that) holds it from `alloc`; a socket write from it holds it too
 * (`hold`) until the write is done with the memory. The bytes go back to the slab when
 * the last holder drops it, never earlier: a slot reused while a write still reads it
 * would put another request's values on the wire.
 */
export class SlabSlot implements KernelSlot {
  private holders = 1;

  constructor(
    private readonly slab: StagingSlab,
    /** Byte offset in the slab. */
    readonly offset: number,
    /** Bytes asked for (the slot spans them rounded up to ALIGN). */
    readonly bytes: number,
  ) {}

  get freed(): boolean {
    return this.holders === 0;
  }

  hold(): void {
    if (this.holders === 0) throw new Error('staging slot used after it was freed');
    this.holders++;
  }

  drop(): void {
    if (this.holders === 0) throw new Error('staging slot dropped more often than held');
    if (--this.holders === 0) this.slab.free(this);
  }

  /** The slot's values as the staging dtype's array (float16 and bfloat16 as raw bits). */
  view(dtype: StagingDtype): Float32Array | Uint16Array {
    return dtype === 'float32'
      ? new Float32Array(this.slab.buffer, this.offset, this.bytes / 4)
      : new Uint16Array(this.slab.buffer, this.offset, this.bytes / 2);
  }
}

/**
 * Staged embeddings in one SharedArrayBuffer that the inference thread writes into and
 * the main thread sends from (EPD_STAGING_SLAB_BYTES).
 *
 * Why: an embedding the inference thread hands over as an ArrayBuffer is attached to the
 * main isolate, and V8 counts it as external memory allocated since the last mark-compact
 * (4 MB per 1024×768 image in float32). That alone drove the main thread's collections:
 * `--trace-gc` over 200 1024×768 encodes showed 17 mark-compacts of its ~33 MB heap and
 * ~50 scavenges, against 2 and 8 when the same embeddings were written into a shared
 * buffer (V8 does not account a shared backing store per isolate). The slab is allocated
 * once; its pages are touched only as slots are used, and first fit from the start keeps
 * the used ones together, so resident memory follows the peak staged at once.
 *
 * Slots are allocated first fit from a free list kept sorted by offset and merged with
 * its neighbours on free. When no free range is large enough, `alloc` returns undefined
 * and that embedding is staged as an ordinary buffer instead (as without a slab).
 */
export class StagingSlab {
  readonly buffer: SharedArrayBuffer;
  /** Free ranges, sorted by offset, never adjacent (merged on free). */
  private readonly free_: { offset: number; size: number }[];
  private usedBytes = 0;
  private slotCount = 0;
  private closed = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < ALIGN)
      throw new Error(`staging slab capacity must be at least ${ALIGN} bytes, got ${capacity}`);
    this.capacity = Math.floor(capacity / ALIGN) * ALIGN;
    this.buffer = new SharedArrayBuffer(this.capacity);
    this.free_ = [{ offset: 0, size: this.capacity }];
  }

  /** Its size, the bytes in slots now (each rounded up to the alignment), and the slots. */
  get usage(): SlabUsage {
    return { capacityBytes: this.capacity, usedBytes: this.usedBytes, slots: this.slotCount };
  }

  /** A slot of `bytes`, held by the caller; undefined when no free range fits it. */
  alloc(bytes: number): SlabSlot | undefined {
    if (this.closed || bytes <= 0) return undefined;
    const size = align(bytes);
    for (let i = 0; i < this.free_.length; i++) {
      const range = this.free_[i]!;
      if (range.size < size) continue;
      const slot = new SlabSlot(this, range.offset, bytes);
      range.offset += size;
      range.size -= size;
      if (range.size === 0) this.free_.splice(i, 1);
      this.usedBytes += size;
      this.slotCount++;
      return slot;
    }
    return undefined;
  }

  /** Called by the slot when its last holder drops it. */
  free(slot: SlabSlot): void {
    const size = align(slot.bytes);
    this.usedBytes -= size;
    this.slotCount--;
    let i = 0;
    while (i < this.free_.length && this.free_[i]!.offset < slot.offset) i++;
    const prev = this.free_[i - 1];
    const next = this.free_[i];
    const end = slot.offset + size;
    if (prev && prev.offset + prev.size === slot.offset) {
      prev.size += size;
      if (next && next.offset === end) {
        prev.size += next.size;
        this.free_.splice(i, 1);
      }
    } else if (next && next.offset === end) {
      next.offset = slot.offset;
      next.size += size;
    } else {
      this.free_.splice(i, 0, { offset: slot.offset, size });
    }
  }

  /** Free ranges now (for tests: one range of the whole capacity once everything dropped). */
  get freeRanges(): readonly { offset: number; size: number }[] {
    return this.free_.map((r) => ({ ...r }));
  }

  /** No new slots; slots still held stay valid, and are freed as they are dropped. */
  close(): void {
    this.closed = true;
  }
}
