import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What one injected fault did to the calls around it (docs/reliability.md, "Faults"). */
export interface FaultOutcome {
  /** The fault, as the report names it. */
  fault: string;
  calls: number;
  answeredOk: number;
  /** Answered with an error that names what happened (503 worker_died, owner_gone, …). */
  answeredError: number;
  /** Never answered within the caller's deadline. */
  neverAnswered: number;
  /** Data the service lost and did not say so (an acked write gone, metadata missing). */
  silentlyLost: number;
  /** State left behind afterwards (waiters, request states, staged bytes). */
  leftBehind: number;
  /** The slowest answer, in ms. */
  slowestMs?: number;
}

/**
 * Records `outcome` for the reliability report when the suite runs under
 * `npm run test:reliability` (EPD_RELIABILITY_OUT); prints it either way.
 */
export function recordFault(name: string, outcome: FaultOutcome): void {
  process.stdout.write(`fault ${name}: ${JSON.stringify(outcome)}\n`);
  const out = process.env.EPD_RELIABILITY_OUT;
  if (!out) return;
  mkdirSync(join(out, 'faults'), { recursive: true });
  writeFileSync(join(out, 'faults', `${name}.json`), JSON.stringify(outcome, null, 2));
}
