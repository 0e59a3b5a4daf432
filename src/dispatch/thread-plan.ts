/** ONNX Runtime and preprocessing threads per worker, so N workers do not oversubscribe. */
export interface ThreadPlan {
  cores: number;
  intraOpThreads: number;
  preprocessThreads: number;
  /** Whether each came from the operator's environment rather than from the core count. */
  explicit: { intraOpThreads: boolean; preprocessThreads: boolean };
}

/**
 * Threads per worker: the cores shared evenly between the workers for ONNX Runtime's
 * intra-op pool (at least one each), one preprocessing thread each, unless the operator
 * set EPD_INTRA_OP_THREADS / EPD_PREPROCESS_THREADS (then theirs, per worker).
 */
export function threadPlan(
  dpSize: number,
  cores: number,
  env: Record<string, string | undefined>,
): ThreadPlan {
  const intra = env.EPD_INTRA_OP_THREADS;
  const pre = env.EPD_PREPROCESS_THREADS;
  return {
    cores,
    intraOpThreads: intra ? Number(intra) : Math.max(1, Math.floor(cores / dpSize)),
    preprocessThreads: pre ? Number(pre) : 1,
    explicit: { intraOpThreads: Boolean(intra), preprocessThreads: Boolean(pre) },
  };
}
