/** `promise`, or `onTimeout()` thrown after `ms`; the timer never outlives the race. */
export async function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), Math.max(0, ms));
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
