import { Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { Clock } from './clock';

/**
 * The order a stopping process follows (SIGTERM, SIGINT, SIGHUP), in one place:
 *
 * 0. Nest's `onModuleDestroy`: the NATS server leaves its queue groups (new calls on the
 *    shared subjects go to other instances; its `inst.` subjects stay), the timers stop.
 * 1. Nest's `beforeApplicationShutdown`: a DP supervisor stops its workers, the vLLM
 *    proxy registration and the SGLang bootstrap server go; then, in this order, the
 *    phases below (this service's own hook, which runs after the others').
 * 2. Nest's `onApplicationShutdown`: the TCP sender closes its connections (a frame in
 *    flight gets up to 1 s for its ack), the NATS connection drains (in-flight replies
 *    are flushed, bounded by EPD_SHUTDOWN_GRACE_MS), the bucket keeper stops, traces flush.
 *
 * Then the process waits until its logs are written out, writes in flight included, and
 * exits 0 (stopOnSignals in src/logging/stop-on-signals.ts, wired by bootstrap.ts).
 */
export const SHUTDOWN_PHASES = [
  /**
   * Staged embeddings not yet fully delivered go to the object store with their delivery
   * state, their owner records pointing there (EPD_CACHE_STORE=jetstream, bounded by
   * EPD_DRAIN_MS). Peers still see this instance in the roster and forward calls for its
   * embeddings here meanwhile, and the registry still publishes.
   */
  'hand-off',
  /**
   * Cached embeddings still queued for the object store are written, in what is left of
   * EPD_DRAIN_MS since the shutdown began: after the staged ones, which are not cached
   * anywhere else.
   */
  'flush-cache',
  /** Out of the instance roster at once: calls for what is left here fail fast elsewhere. */
  'leave-roster',
  /**
   * The metadata registry closes: each pending wait is answered with its metadata if it
   * was published meanwhile, else 503 `shutting_down`.
   */
  'close-registry',
] as const;

export type ShutdownPhase = (typeof SHUTDOWN_PHASES)[number];

/** A step: told when (epoch ms) the shutdown began, so that it can keep to a shared budget. */
type StepRun = (startedAt: number) => Promise<void>;

interface Step {
  name: string;
  run: StepRun;
}

/**
 * Runs the phases of SHUTDOWN_PHASES in their order, once: every step of one phase at
 * once, the next phase when they have all ended (a step that fails is logged and does not
 * stop the others). Features add their steps where their module is put together, never
 * by a method of another feature's service.
 */
@Injectable()
export class ShutdownPhases implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Shutdown');
  private readonly steps = new Map<ShutdownPhase, Step[]>();
  private running?: Promise<void>;

  constructor(private readonly clock: Clock) {}

  /** Adds `run`, called `name` in logs, to `phase`. */
  on(phase: ShutdownPhase, name: string, run: StepRun): void {
    const steps = this.steps.get(phase) ?? [];
    steps.push({ name, run });
    this.steps.set(phase, steps);
  }

  /** Each phase with the names of its steps, in order (what a test reads of the plan). */
  view(): { phase: ShutdownPhase; steps: string[] }[] {
    return SHUTDOWN_PHASES.map((phase) => ({
      phase,
      steps: (this.steps.get(phase) ?? []).map((s) => s.name),
    }));
  }

  /** Runs every phase once; a second call waits for the first. */
  run(): Promise<void> {
    this.running ??= this.runAll();
    return this.running;
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.run();
  }

  private async runAll(): Promise<void> {
    const startedAt = this.clock.now();
    for (const phase of SHUTDOWN_PHASES) {
      const steps = this.steps.get(phase) ?? [];
      if (steps.length === 0) continue;
      const started = performance.now();
      await Promise.all(
        steps.map((step) =>
          step
            .run(startedAt)
            .catch((err: unknown) =>
              this.logger.warn(
                { phase, step: step.name, err: (err as Error).message },
                'a shutdown step failed; the next phase goes on',
              ),
            ),
        ),
      );
      this.logger.debug(
        { phase, steps: steps.map((s) => s.name), ms: Math.round(performance.now() - started) },
        'shutdown phase done',
      );
    }
  }
}
