/**
 * Reusable receive buffers in power-of-two size classes. Fresh large buffers are slow here
 * (the kernel zero-fills every new page), so a receiver keeps what it allocated for the
 * next frame of a similar size.
 */
export class BufferPool {
  private readonly free = new Map<number, Buffer[]>();
  private held = 0;

  constructor(
    /** Most bytes kept idle in the pool; beyond that, returned buffers are dropped. */
    private readonly maxIdleBytes = 256 * 1024 * 1024,
  ) {}

  acquire(size: number): Buffer {
    const cls = size <= 4096 ? 4096 : 2 ** Math.ceil(Math.log2(size));
    const list = this.free.get(cls);
    const buf = list?.pop();
    if (buf) {
      this.held -= cls;
      return buf.subarray(0, size);
    }
    return Buffer.allocUnsafeSlow(cls).subarray(0, size);
  }

  release(buf: Buffer): void {
    const whole = Buffer.from(buf.buffer, buf.byteOffset, buf.buffer.byteLength - buf.byteOffset);
    const cls = whole.length;
    if ((cls & (cls - 1)) !== 0 || this.held + cls > this.maxIdleBytes) return;
    const list = this.free.get(cls) ?? [];
    list.push(whole);
    this.free.set(cls, list);
    this.held += cls;
  }

  get idleBytes(): number {
    return this.held;
  }
}
