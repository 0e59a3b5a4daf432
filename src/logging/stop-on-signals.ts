import type { INestApplicationContext } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import { PinoLogger } from 'nestjs-pino';

/** What flushLogs needs of a logger: pino's flush with a callback. */
export interface FlushableLog {
  flush(cb?: (err?: Error) => void): void;
}

/**
 * Waits until the logger has written out every line it holds, or until `giveUp` settles.
 * Resolves `flushed`, `timed_out` (the reader of stdout did not read in time) or `failed`.
 *
 * Why a process must wait for this before `process.exit`: pino's own exit hook writes out
 * what it holds synchronously (sonic-boom's flushSync), but skips the chunk of an
 * `fs.write` still in flight: with stdout a slow pipe, whatever of that chunk was not yet
 * written was gone (one fresh-clone CI run lost one request line of 600 in log-flush).
 * Once this resolves `flushed`, nothing is in flight, and the exit hook has nothing left to do.
 */
export function flushLogs(
  giveUp: Promise<unknown>,
  log: FlushableLog | undefined = PinoLogger.root,
): Promise<'flushed' | 'timed_out' | 'failed'> {
  if (!log) return Promise.resolve('flushed');
  const flushed = new Promise<'flushed' | 'failed'>((resolve) => {
    try {
      log.flush((err) => resolve(err ? 'failed' : 'flushed'));
    } catch {
      resolve('failed');
    }
  });
  return Promise.race([flushed, giveUp.then(() => 'timed_out' as const)]);
}

/** Spare time kept between the logs' flush and the last-resort exit. */
const FLUSH_MARGIN_MS = 100;

/**
 * Closes the app (Nest's shutdown hooks: the NATS drain, the handoff of staged
 * embeddings), waits for the logs to be written out, then exits with `codes.ok`, or with
 * `codes.failed` if the close threw. Bounded by `boundMs` (shutdownBoundMs): past it the
 * process exits with `codes.failed` on its own, whatever still hangs; the wait for the logs
 * ends FLUSH_MARGIN_MS before that.
 */
export async function closeAndExit(
  app: Pick<INestApplicationContext, 'close'>,
  options: {
    boundMs: number;
    codes: { ok: number; failed: number };
    onCloseError?: (err: unknown) => void;
    /** The logger to wait for: the app's pino logger unless given. */
    log?: FlushableLog;
  },
): Promise<never> {
  const { boundMs, codes } = options;
  setTimeout(() => process.exit(codes.failed), boundMs).unref();
  const giveUp = delay(Math.max(0, boundMs - FLUSH_MARGIN_MS), undefined, { ref: false });
  let code = codes.ok;
  try {
    await app.close();
  } catch (err) {
    options.onCloseError?.(err);
    code = codes.failed;
  }
  await flushLogs(giveUp, options.log ?? PinoLogger.root);
  process.exit(code);
}

/**
 * How a signal stops the process: closeAndExit with 0 (1 if the close threw or the bound
 * passed). Nest's enableShutdownHooks({ useProcessExit: true }) did the same but for the
 * logs: it called process.exit as soon as the hooks ended, and lines pino still had in
 * flight were lost (see flushLogs). A second signal while stopping changes nothing.
 */
export function stopOnSignals(
  app: Pick<INestApplicationContext, 'close'>,
  options: {
    signals: NodeJS.Signals[];
    boundMs: number;
    onCloseError: (err: unknown) => void;
    /** The logger to wait for: the app's pino logger unless given. */
    log?: FlushableLog;
  },
): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void closeAndExit(app, { ...options, codes: { ok: 0, failed: 1 } });
  };
  for (const signal of options.signals) process.on(signal, stop);
}
