import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CallLedger, LedgerSummary } from './ledger';

/** What one injected fault did to the calls around it (docs/reliability.md, "Faults"). */
export interface FaultOutcome extends LedgerSummary {
  /** The fault, as the report names it. */
  fault: string;
  /** Acknowledged work whose result no receiver got and no caller was told of. */
  silentlyLost: number;
  /** State still present afterwards (waiters, request states, registry entries). */
  leftBehind: number;
  /** The bounds this fault's test holds its counts to. */
  bounds: Required<FaultBounds>;
}

/** Upper bounds on a fault's counts; each defaults to 0. */
export interface FaultBounds {
  maxNeverAnswered?: number;
  maxSilentlyLost?: number;
  maxLeftBehind?: number;
}

/**
 * Records what a fault test observed for the reliability report (when the suite runs under
 * `npm run test:reliability`, EPD_RELIABILITY_OUT), prints it either way, and asserts its
 * bounds, so a regression fails the test that measured it. The call counts come from the
 * client-side `ledger`; `silentlyLost` and `leftBehind` are what the test read afterwards.
 */
export function recordFault(
  name: string,
  observed: { fault: string; ledger: CallLedger; silentlyLost: number; leftBehind: number },
  bounds: FaultBounds = {},
): FaultOutcome {
  const held = {
    maxNeverAnswered: bounds.maxNeverAnswered ?? 0,
    maxSilentlyLost: bounds.maxSilentlyLost ?? 0,
    maxLeftBehind: bounds.maxLeftBehind ?? 0,
  };
  const outcome: FaultOutcome = {
    fault: observed.fault,
    ...observed.ledger.summary(),
    silentlyLost: observed.silentlyLost,
    leftBehind: observed.leftBehind,
    bounds: held,
  };
  process.stdout.write(`fault ${name}: ${JSON.stringify(outcome)}\n`);
  const out = process.env.EPD_RELIABILITY_OUT;
  if (out) {
    mkdirSync(join(out, 'faults'), { recursive: true });
    writeFileSync(join(out, 'faults', `${name}.json`), JSON.stringify(outcome, null, 2));
  }
  if (outcome.calls === 0) throw new Error(`fault ${name}: the ledger recorded no call`);
  const over = (
    [
      ['never answered', outcome.neverAnswered, held.maxNeverAnswered],
      ['silently lost', outcome.silentlyLost, held.maxSilentlyLost],
      ['left behind', outcome.leftBehind, held.maxLeftBehind],
    ] as const
  )
    // A count that is not a number (a failed read) fails as surely as one over its bound.
    .filter(([, seen, bound]) => !(Number.isInteger(seen) && seen >= 0 && seen <= bound));
  if (over.length > 0)
    throw new Error(
      `fault ${name}: ${over.map(([what, seen, bound]) => `${what} ${seen} > bound ${bound}`).join(', ')}; ` +
        `errors by type ${JSON.stringify(outcome.errorTypes)}`,
    );
  return outcome;
}
