import { errors } from '@nats-io/transport-node';
import { waitFor } from './calls';

/** What the client saw of one call: an answer (ok or an error), or nothing in time. */
export type CallOutcome = 'ok' | 'error' | 'never';

export interface LedgerEntry {
  label: string;
  outcome: CallOutcome;
  /** The error's `type` (or what the client saw instead of an answer). */
  detail?: string;
  sentAt: number;
  /** When the answer came, or when the ledger stopped waiting for it. */
  settledAt: number;
}

/** How a caller reads a reply: ok, or an error of a named type. */
export type Answer = { ok: true } | { ok: false; type: string };

/** A NATS reply `{response}` / `{err}` as the service's wire contract shapes it. */
export const natsAnswer = (r: WireReply): Answer =>
  r.err ? { ok: false, type: String(r.err.type ?? r.err.code) } : { ok: true };

/** Any reply shaped `{response}` / `{err}` (the suites type theirs in several ways). */
type WireReply = { err?: { type?: unknown; code?: unknown; message?: unknown } };

/** An HTTP answer: 2xx is ok; anything else is an error of the body's `type`. */
export const httpAnswer = (r: { status: number; body?: unknown }): Answer =>
  r.status < 400
    ? { ok: true }
    : { ok: false, type: String((r.body as { type?: string } | undefined)?.type ?? r.status) };

/**
 * The client-side ledger the reliability table counts from: every call sent, and what came
 * of it. A call not answered within its deadline plus `slackMs` is "never answered", and so
 * is one whose client failed without an answer (a request timeout, a closed connection).
 * NATS no-responders is the server's answer (503, no instance serves the subject now).
 */
export class CallLedger {
  readonly entries: LedgerEntry[] = [];
  private faultAt: number | undefined;

  constructor(private readonly slackMs = 2000) {}

  /** Sends one call and records its outcome; resolves to the reply, if one came. */
  async track<T>(
    label: string,
    deadlineMs: number,
    send: () => Promise<T>,
    answer: (reply: T) => Answer,
  ): Promise<T | undefined> {
    const sentAt = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), deadlineMs + this.slackMs);
    });
    const sent = send().then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error }),
    );
    try {
      const settled = await Promise.race([sent, late]);
      const settledAt = Date.now();
      if (settled === 'late') {
        this.entries.push({
          label,
          outcome: 'never',
          detail: 'no answer by deadline + slack',
          sentAt,
          settledAt,
        });
        return undefined;
      }
      if ('error' in settled) {
        const noResponders =
          settled.error instanceof errors.NoRespondersError ||
          (settled.error instanceof errors.RequestError && settled.error.isNoResponders());
        this.entries.push({
          label,
          outcome: noResponders ? 'error' : 'never',
          detail: noResponders
            ? 'no_responders'
            : String((settled.error as Error)?.message ?? settled.error),
          sentAt,
          settledAt,
        });
        return undefined;
      }
      const a = answer(settled.reply);
      this.entries.push({
        label,
        outcome: a.ok ? 'ok' : 'error',
        ...(a.ok ? {} : { detail: a.type }),
        sentAt,
        settledAt,
      });
      return settled.reply;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A NATS call whose reply is read as the wire contract says. */
  nats<R extends WireReply>(
    label: string,
    deadlineMs: number,
    send: () => Promise<R>,
  ): Promise<R | undefined> {
    return this.track(label, deadlineMs, send, natsAnswer);
  }

  /** Marks the moment the fault was injected: "slowest answer" counts from here. */
  markFault(): void {
    this.faultAt = Date.now();
  }

  summary(): LedgerSummary {
    const count = (o: CallOutcome) => this.entries.filter((e) => e.outcome === o).length;
    const errorTypes: Record<string, number> = {};
    for (const e of this.entries)
      if (e.outcome !== 'ok') errorTypes[e.detail ?? '?'] = (errorTypes[e.detail ?? '?'] ?? 0) + 1;
    const answered = this.entries.filter((e) => e.outcome !== 'never');
    return {
      calls: this.entries.length,
      answeredOk: count('ok'),
      answeredError: count('error'),
      neverAnswered: count('never'),
      ...(answered.length
        ? {
            slowestMs: Math.max(
              ...answered.map((e) => e.settledAt - Math.max(e.sentAt, this.faultAt ?? e.sentAt)),
            ),
          }
        : {}),
      errorTypes,
    };
  }
}

export interface LedgerSummary {
  calls: number;
  answeredOk: number;
  answeredError: number;
  neverAnswered: number;
  slowestMs?: number;
  /** Calls not answered ok, by error type (or what the client saw). */
  errorTypes: Record<string, number>;
}

/** Whether an error reply tells the caller that the data it was promised is gone. */
export const namesLoss = (r: WireReply | undefined): boolean =>
  !!r?.err &&
  (['embedding_lost', 'owner_gone', 'worker_died'].includes(String(r.err.type)) ||
    /was lost|is lost/.test(String(r.err.message)));

interface RegistryView {
  waiters: number;
}
type RequestsView = { requests: { req_id: string }[] };
/** One process lists its requests; a DP supervisor lists each rank's. */
type AdminRequests = RequestsView | { ranks: RequestsView[] };

/**
 * What a fault left behind in the service at `url`, read from its admin API: waiters still
 * parked, and for each of `reqIds` a request state or a registry entry still present.
 */
export async function leftBehind(
  url: string,
  reqIds: readonly string[],
  headers: Record<string, string> = {},
): Promise<number> {
  const read = async <T>(path: string): Promise<T> => {
    const r = await fetch(`${url}${path}`, { headers });
    if (!r.ok) throw new Error(`GET ${path}: ${r.status}`);
    return (await r.json()) as T;
  };
  const registry = await read<RegistryView>('/admin/registry');
  const requests = await read<AdminRequests>('/admin/requests');
  if (!Number.isInteger(registry.waiters))
    throw new Error(`GET /admin/registry: no waiter count in ${JSON.stringify(registry)}`);
  const lists = 'ranks' in requests ? requests.ranks : [requests];
  const staged = new Set(lists.flatMap((l) => l.requests.map((r) => r.req_id)));
  let count = registry.waiters;
  for (const id of reqIds) {
    if (staged.has(id)) count++;
    const entry = await fetch(`${url}/admin/registry/${encodeURIComponent(id)}`, { headers });
    if (entry.status === 200) count++;
    else if (entry.status !== 404) throw new Error(`GET /admin/registry/${id}: ${entry.status}`);
  }
  return count;
}

/**
 * `leftBehind` once the service's TTL has had its chance: polled until nothing is left or
 * `ttlMs` (the service's EPD_SEND_TIMEOUT_MS plus its sweep) has passed; the last count.
 */
export async function leftBehindAfterTtl(
  url: string,
  reqIds: readonly string[],
  ttlMs: number,
  headers: Record<string, string> = {},
): Promise<number> {
  let count = Number.NaN;
  let readError: unknown;
  // Not reaching zero is an observation here, not a failure: recordFault holds the count
  // to its bound and reports it. A read that fails is a failure: never a NaN that no
  // bound catches.
  await waitFor(
    async () => {
      try {
        count = await leftBehind(url, reqIds, headers);
        readError = undefined;
      } catch (err) {
        count = Number.NaN;
        readError = err;
        return false;
      }
      return count === 0;
    },
    ttlMs,
    500,
  ).catch(() => undefined);
  if (readError !== undefined || !Number.isInteger(count))
    throw new Error(`what was left behind could not be read: ${String(readError)}`);
  return count;
}
