import {
  Injectable,
  Logger,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { PATTERN_METADATA } from '@nestjs/microservices/constants';
import { from, mergeMap, type Observable } from 'rxjs';
import { Clock } from './clock';
import { callOf, Deadlines } from './deadline';
import { Errors } from './errors/error-catalogue';
import { withTimeout } from './timeout';

interface Condition {
  met: boolean;
  /** Why it is not met, once its promise rejected. */
  error?: string;
  /** What it waits for while pending, when its provider can say more than "pending". */
  detail?: () => string;
}

/**
 * When this process may serve: every condition a feature requires (the metadata store
 * open, the model loaded, the instance roster written) met. The NATS server joins its
 * queue groups and instance subjects only then, and marks itself serving; /health/ready
 * reports `serving` up from that moment, so a load balancer and the NATS queue group
 * start sending calls at the same time. A data-plane HTTP call that arrives earlier waits
 * for it within its own deadline (`@AwaitsReadiness()`).
 *
 * Conditions are required while the app initialises (constructors, onModuleInit); the
 * first wait happens after that, when the servers start.
 */
@Injectable()
export class Readiness {
  private readonly logger = new Logger('Readiness');
  private readonly conditions = new Map<string, Condition>();
  private resolveReady!: () => void;
  private readonly readyPromise = new Promise<void>((resolve) => (this.resolveReady = resolve));
  private isServing = false;
  /** Every condition met (checked on each data-plane HTTP call: kept, not recomputed). */
  private allMet = false;
  /**
   * The first wait has come: the app has initialised, so no further condition can be
   * required. Until then a condition met early (the memory store opens at once) must not
   * make the process ready before a provider made later has required its own.
   */
  private sealed = false;
  /** Called each time a condition is met or fails (a DP worker reports its state to its supervisor). */
  private readonly listeners: (() => void)[] = [];

  constructor(private readonly clock: Clock) {}

  /**
   * `met` resolves when `name` holds; if it rejects, the process never serves (health says
   * why). `detail` says what it waits for while pending, instead of "pending".
   */
  require(name: string, met: Promise<unknown>, detail?: () => string): void {
    const condition: Condition = { met: false, detail };
    this.conditions.set(name, condition);
    this.allMet = false;
    const started = this.clock.elapsed();
    met.then(
      () => {
        condition.met = true;
        this.logger.log(
          { condition: name, ms: Math.round(this.clock.elapsed() - started) },
          `${name}: ready`,
        );
        this.check();
        this.changed();
      },
      (err: unknown) => {
        condition.error = (err as Error).message;
        this.changed();
      },
    );
  }

  /** `listener` runs each time a condition is met or fails, from now on. */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  /** The first condition that failed, as `name: reason` (the process will never be ready), or null. */
  get failed(): string | null {
    for (const [name, c] of this.conditions)
      if (c.error !== undefined) return `${name}: ${c.error}`;
    return null;
  }

  private check(): void {
    this.allMet = this.sealed && [...this.conditions.values()].every((c) => c.met);
    if (this.allMet) this.resolveReady();
  }

  /** Resolves once every required condition is met (at once if none was required). */
  whenReady(): Promise<void> {
    this.sealed = true;
    this.check();
    return this.readyPromise;
  }

  get ready(): boolean {
    return this.allMet;
  }

  /** The conditions not met yet, with the reason of those that failed. */
  get waitingFor(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, c] of this.conditions)
      if (!c.met) out[name] = c.error ?? c.detail?.() ?? 'pending';
    return out;
  }

  /** The NATS server has joined its subjects (after every condition was met). */
  markServing(): void {
    this.isServing = true;
  }

  get serving(): boolean {
    return this.isServing;
  }
}

/**
 * A controller of data-plane handlers whose HTTP calls wait for the process to be ready,
 * within the call's deadline, instead of meeting a store that is not open yet; at the
 * deadline, 503 `not_ready` naming what is still missing. Its `@MessagePattern` handlers
 * get no interceptor: NATS calls reach the process only once it serves, and an interceptor
 * puts an RxJS chain around every call (part of what made the registry's per-call cost
 * grow 1.5x, bench/results/registry-burst.md).
 */
export const AwaitsReadiness =
  (): ClassDecorator =>
  (target: { prototype: object }): void => {
    const proto = target.prototype as Record<string, unknown>;
    for (const key of Object.getOwnPropertyNames(proto)) {
      const descriptor = Object.getOwnPropertyDescriptor(proto, key);
      const handler = descriptor?.value as unknown;
      if (key === 'constructor' || typeof handler !== 'function') continue;
      if (Reflect.getMetadata(PATTERN_METADATA, handler) !== undefined) continue;
      UseInterceptors(ReadinessInterceptor)(proto, key, descriptor!);
    }
  };

@Injectable()
export class ReadinessInterceptor implements NestInterceptor {
  constructor(
    private readonly readiness: Readiness,
    private readonly deadlines: Deadlines,
    private readonly clock: Clock,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (this.readiness.ready) return next.handle();
    const deadline = this.deadlines.forCall(callOf(context));
    const wait = withTimeout(
      this.readiness.whenReady(),
      Math.max(1, deadline - this.clock.now()),
      () => Errors.notReady(Object.keys(this.readiness.waitingFor).join(', ')),
    );
    return from(wait).pipe(mergeMap(() => next.handle()));
  }
}
