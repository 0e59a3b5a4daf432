/**
 * Any number of listeners to one event, called in the order they were added. A listener
 * that throws does not stop the others or the emitter: its error goes to `onError`.
 * (The single-slot `this.listener = fn` it replaces let a second registration silently
 * drop the first.)
 */
export class Listeners<A extends unknown[]> {
  private readonly fns = new Set<(...args: A) => void>();

  constructor(private readonly onError: (err: unknown) => void = () => undefined) {}

  /** Adds `fn`; the returned function removes it. */
  add(fn: (...args: A) => void): () => void {
    this.fns.add(fn);
    return () => this.fns.delete(fn);
  }

  emit(...args: A): void {
    for (const fn of this.fns) {
      try {
        fn(...args);
      } catch (err) {
        this.onError(err);
      }
    }
  }

  get size(): number {
    return this.fns.size;
  }
}
