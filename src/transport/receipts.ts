import { randomUUID } from 'node:crypto';
import {
  createInbox,
  headers,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/transport-node';

/**
 * The receipt protocol, for calls that must not vanish in a NATS node loss (core NATS is
 * at-most-once: measured on a 3-node nats-server 2.9 cluster with plain nats.js clients
 * and no service at all, 16 of 4,706 requests sent in the 4 s after a node was killed
 * were never delivered, and an answer published into a dying node is lost the same way).
 *
 * - The caller's request carries RECEIPT_HEADER and a CALL_HEADER id that stays the same
 *   for every send of the call; all sends share one reply inbox.
 * - The server answers an empty message with `Epd-Receipt: received` the moment the call
 *   arrives (before its overload gate), naming in PROBE_HEADER the subject where this
 *   process, and only it, can be asked again. Then it answers the call.
 * - A send with no receipt within RECEIPT_MS was lost in transit: it is sent again, to
 *   the original subject. After RECEIPT_ATTEMPTS such sends, the callee is unreachable.
 * - Once the call is taken, the caller asks again every PROBE_MS, on the probe subject.
 *   The server knows the call by its id: while it runs, a probe gets a receipt and nothing
 *   else; once answered, a probe gets the same answer again (kept CallLedger.KEEP_MS past
 *   the call's deadline). An answer lost in transit is therefore replayed within about
 *   PROBE_MS, and a callee that took the call and then fell silent for RECEIPT_ATTEMPTS
 *   probes is unreachable, long before the deadline.
 * Opt-in: a caller that does not ask (SGLang's) sees one reply, as before.
 */
export const RECEIPT_HEADER = 'Epd-Receipt';
export const RECEIPT_VALUE = 'received';
export const CALL_HEADER = 'Epd-Call';
export const PROBE_HEADER = 'Epd-Probe';
/** The call's deadline, epoch ms: the callee's deadline too (docs/contract.md). */
export const DEADLINE_HEADER = 'Deadline';
export const RECEIPT_MS = 300;
export const RECEIPT_ATTEMPTS = 3;
export const PROBE_MS = 500;

export type ReceiptOutcome =
  | { kind: 'answer'; msg: Msg }
  /** RECEIPT_ATTEMPTS sends in a row heard nothing; `received`: the call had been taken. */
  | { kind: 'unreachable'; received: boolean }
  /** A send met "no responders" and the caller's `gone` said the callee is gone. */
  | { kind: 'gone' }
  | { kind: 'deadline'; received: boolean };

export interface ReceiptCall {
  subject: string;
  /** The body of one send, given the ms left until the deadline. */
  body: (remainingMs: number) => string;
  /** Adds the caller's own headers (deadline, trace context) to a send. */
  headers?: (h: MsgHdrs) => void;
  /** When the callee's deadline passes, epoch ms (sent as the DEADLINE_HEADER). */
  deadline: number;
  /** How long an answer is awaited (default: the deadline). */
  answerBy?: number;
  /** Epoch ms: the service's Clock, or the SDK's own wall clock. */
  now: () => number;
  /**
   * A send met "no responders": is the callee gone (true), or maybe only moving to another
   * node (false: the send counts as lost)? `final`: every send since the last sign of life
   * met none, RECEIPT_ATTEMPTS of them (or the deadline leaves no time for another).
   */
  gone?: (final: boolean, taken: boolean) => boolean;
  /**
   * Whether a send with no receipt is sent again (default true). False for a call that
   * must not run twice if only its receipt was lost (an encode through a queue group):
   * it then waits for its receipt or answer until the deadline, and is only probed once
   * taken.
   */
  resend?: boolean;
  /** Told of each send after the first: whether it is a probe (the call was taken). */
  onResend?: (probe: boolean) => void;
}

const isNoResponders = (msg: Msg) => msg.headers?.code === 503 && msg.data.length === 0;

type Handler = (err: Error | null, msg: Msg) => void;

/**
 * One wildcard inbox subscription per connection (as nats.js's own request mux), so a
 * call costs no SUB/UNSUB of its own: each call is a token under it, and its handler is
 * dropped when the call ends (the map holds only calls in flight).
 */
class ReceiptMux {
  /** Under the connection's own inbox prefix (nats.js keeps it in `options`). */
  readonly prefix: string;
  readonly calls = new Map<string, Handler>();
  private readonly sub;

  constructor(nc: NatsConnection, onClosed: () => void) {
    this.prefix = createInbox(
      (nc as NatsConnection & { options?: { inboxPrefix?: string } }).options?.inboxPrefix,
    );
    // A closed subscription (the connection closed, a permission error) ends every call
    // in flight with that error, and the next call makes a new one.
    const end = (err: Error) => {
      onClosed();
      for (const handler of [...this.calls.values()]) handler(err, undefined as unknown as Msg);
    };
    this.sub = nc.subscribe(`${this.prefix}.*`, {
      callback: (err, msg) => {
        if (err) return end(err);
        this.calls.get(msg.subject.slice(this.prefix.length + 1))?.(null, msg);
      },
    });
    // nats.js settles `closed` with the server's error as its value (a permission
    // violation), or with nothing when the connection closed.
    void this.sub.closed.then(
      (err: unknown) => end(err instanceof Error ? err : new Error('the NATS connection closed')),
      (err: unknown) => end(err instanceof Error ? err : new Error(String(err))),
    );
  }
}

const muxes = new WeakMap<NatsConnection, ReceiptMux>();

function muxOf(nc: NatsConnection): ReceiptMux {
  let mux = muxes.get(nc);
  if (!mux) {
    const created: ReceiptMux = new ReceiptMux(nc, () => {
      if (muxes.get(nc) === created) muxes.delete(nc);
    });
    mux = created;
    muxes.set(nc, mux);
  }
  return mux;
}

/** Calls in flight under the receipt protocol on `nc` (their handlers, for tests). */
export function receiptCallsInFlight(nc: NatsConnection): number {
  return muxes.get(nc)?.calls.size ?? 0;
}

/** One call under the receipt protocol (see above); resolves with how it ended. */
export function requestWithReceipts(
  nc: NatsConnection,
  call: ReceiptCall,
): Promise<ReceiptOutcome> {
  const now = call.now;
  // Unguessable (a nuid steps by a small increment): a call id is what a probe names.
  const callId = randomUUID();
  const mux = muxOf(nc);
  const inbox = `${mux.prefix}.${callId}`;
  return new Promise<ReceiptOutcome>((resolve, reject) => {
    let received = false;
    let probeSubject = call.subject;
    let silent = 0; // sends since the last sign of life
    let silentNoResponders = 0; // of those, the ones that met "no responders"
    let tick: NodeJS.Timeout | undefined;
    let finished = false;
    const finish = (outcome: ReceiptOutcome | Error) => {
      if (finished) return;
      finished = true;
      clearTimeout(tick);
      clearTimeout(answerTimer);
      mux.calls.delete(callId);
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const schedule = (ms: number) => {
      clearTimeout(tick);
      tick = setTimeout(onTick, ms);
    };
    const send = () => {
      const h = headers();
      h.set(RECEIPT_HEADER, '1');
      h.set(CALL_HEADER, callId);
      h.set(DEADLINE_HEADER, String(call.deadline));
      call.headers?.(h);
      silent++;
      schedule(received ? PROBE_MS : RECEIPT_MS);
      try {
        const body = call.body(Math.max(1, call.deadline - now()));
        nc.publish(received ? probeSubject : call.subject, body, { reply: inbox, headers: h });
      } catch (err) {
        finish(err as Error);
      }
    };
    let graced = false;
    const onTick = () => {
      if (!received && call.resend === false) return; // its receipt or answer, or the deadline
      if (silent >= RECEIPT_ATTEMPTS) {
        // A send met "no responders" and the others' replies are not all here yet: on a
        // busy machine they came after RECEIPT_MS (seen in CI beside CPU burners: an owner
        // killed by PID called unreachable, not gone). They are waited for once more.
        if (!received && !graced && call.gone && silentNoResponders >= 1) {
          graced = true;
          return schedule(RECEIPT_MS);
        }
        return finish({ kind: 'unreachable', received });
      }
      if (call.deadline - now() <= 1) return; // the answer timer ends it
      call.onResend?.(received);
      send();
    };
    mux.calls.set(callId, (err, msg) => {
      if (err) return finish(err);
      if (isNoResponders(msg)) {
        silentNoResponders++;
        const final =
          (silent >= RECEIPT_ATTEMPTS && silentNoResponders >= silent) ||
          call.deadline - now() <= RECEIPT_MS;
        if (call.gone?.(final, received)) finish({ kind: 'gone' });
        return; // counted as lost: the next tick sends again
      }
      if (msg.headers?.get(RECEIPT_HEADER) === RECEIPT_VALUE) {
        received = true;
        silent = 0;
        silentNoResponders = 0;
        probeSubject = msg.headers.get(PROBE_HEADER) || probeSubject;
        schedule(PROBE_MS);
        return;
      }
      finish({ kind: 'answer', msg });
    });
    const answerTimer = setTimeout(
      () => finish({ kind: 'deadline', received }),
      Math.max(1, (call.answerBy ?? call.deadline) - now()),
    );
    send();
  });
}
