import Piscina from 'piscina';

/**
 * Returns `value` from a piscina worker with `buffers` moved (not copied) to the caller:
 * large Float32Arrays cross the thread boundary for free.
 */
export function moveOut<T>(value: T, buffers: ArrayBufferLike[]): T {
  // Called in-process (benchmarks, tests), there is no thread boundary to cross.
  if (!Piscina.isWorkerThread) return value;
  const transferable = {
    get [Piscina.transferableSymbol]() {
      return buffers;
    },
    get [Piscina.valueSymbol]() {
      return value;
    },
  };
  return Piscina.move(transferable as never) as unknown as T;
}
