import {
  Empty,
  headers,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import { Logger, type OnModuleDestroy } from '@nestjs/common';
import { ServerNats } from '@nestjs/microservices';
import type { AppConfig } from '../config/app-config';
import type { Readiness } from '../common/readiness';
import type { Clock } from '../common/clock';
import { JsonInteropDeserializer } from './json-interop.deserializer';
import { CallLedger } from './call-ledger';
import {
  CALL_HEADER,
  DEADLINE_HEADER,
  PROBE_HEADER,
  RECEIPT_HEADER,
  RECEIPT_VALUE,
} from './receipts';
import { OverloadGate, sheddable } from './overload-gate';
import { QueueGroupMembership } from './queue-group-membership';
import { ReplySerializer } from './reply.serializer';
import type { NatsConnectionService } from './nats-connection.service';
import type { ServedSubjects } from './served-subjects';
import { spaceOf, type CallSpace } from './tenant-scope';
import { contextFromNats, tracingEnabled, withContext } from '../tracing/tracing';
import { withTimeout } from '../common/timeout';

type NatsCallback = (err: Error | null, msg: Msg) => void;

/** Receipt headers kept per dp_type (one per space a call arrived in); beyond, built per call. */
const MAX_RECEIPT_HEADERS = 256;

/**
 * A call's id in the ledger, scoped by its space and dp_type: a reused id on another
 * dp_type, in another tenant or on an internal subject is another call, never answered
 * with the first one's answer (it was: a probe on any dp_type returned any answer).
 */
function ledgerKey(space: CallSpace, dpType: string, callId: string): string {
  const scope =
    space.kind === 'tenant' || space.kind === 'invalid' ? `t.${space.tenant}` : space.kind;
  return `${scope}/${dpType}/${callId}`;
}

/** How long a shutdown waits for the queue groups' UNSUBs to be flushed. */
const SHUTDOWN_LEAVE_MS = 1_000;

/**
 * Nest's NATS server on the process's shared connection. Handlers are registered by
 * dp_type (`@MessagePattern('wait_metadata')`); this server subscribes each one, so the
 * prefix stays configuration, not code, to:
 * - one process (EPD_DP_SIZE=1): `<prefix>.v1.<dp_type>` in the queue group, rank 0's
 *   `<prefix>.v1.rank.0.<dp_type>`, and this instance's `<prefix>.v1.inst.<id>.<dp_type>`
 *   (where peers forward calls for the embeddings staged here);
 * - a DP supervisor: the plain subjects and the instance subjects (it dispatches to ranks);
 * - DP worker N: `<prefix>.v1.rank.<N>.<dp_type>` (in the queue group: one instance's
 *   rank N answers) and `<prefix>.v1.inst.<id>.rank.<N>.<dp_type>`, where its supervisor
 *   and owner routing reach it. Never the plain subjects: those go through dispatch.
 */
export class EpdNatsServer extends ServerNats implements OnModuleDestroy {
  private readonly nats: NatsConnectionService;
  private readonly config: AppConfig;
  /** Sheds calls beyond what this process sustains (EPD_OVERLOAD_QUEUE_MS). */
  readonly gate: OverloadGate;
  /** This process's place in the shared subjects' queue group, withdrawn while it sheds. */
  readonly membership: QueueGroupMembership;
  /** Calls taken under the receipt protocol, so a second send of one never runs it twice. */
  readonly calls: CallLedger;
  /** Queue-group subscriptions that are never shed (the others are in `membership`). */
  private readonly sharedSubs: Subscription[] = [];
  private readonly log = new Logger('NatsServer');

  constructor(
    nats: NatsConnectionService,
    config: AppConfig,
    /** What this process serves, and names in its receipts, by its DP role. */
    private readonly subjects: ServedSubjects,
    private readonly readiness: Readiness,
    clock: Clock,
  ) {
    super({
      queue: config.nats.queueGroup,
      deserializer: new JsonInteropDeserializer(
        config.nats.maxRequestBytes,
        config.nats.subjectPrefix,
      ),
      serializer: new ReplySerializer(),
    });
    this.nats = nats;
    this.config = config;
    this.calls = new CallLedger(() => clock.now(), config.timeouts.reqTimeoutMs);
    this.gate = new OverloadGate(
      config.overload.queueMs,
      config.overload.maxQueued,
      () => clock.elapsed(),
      () => clock.now(),
      config.overload.sheddingQueueMs,
    );
    this.membership = new QueueGroupMembership(Math.max(config.overload.queueMs, 1), () =>
      clock.elapsed(),
    );
    if (config.overload.stepOut) this.gate.stepOut = this.membership;
  }

  /**
   * The shared connection. If the app shuts down before NATS was ever reached, there is
   * nothing to listen on: the server stays unstarted instead of failing Nest's listen with
   * an unhandled rejection while the process is closing.
   */
  override createNatsClient(): Promise<NatsConnection> {
    return this.nats.connection().catch((err: unknown) => {
      if (this.nats.stoppedBeforeConnect) return new Promise<NatsConnection>(() => undefined);
      throw err;
    });
  }

  /**
   * Subscribes only once the process can serve (Readiness: the metadata store open, the
   * model loaded, the roster written): a call the queue group gives this process before
   * then would be refused although another instance, or a wait of a few ms, would have
   * served it (seen at start-up under load: 503 "KV bucket … is not open yet"). Serving
   * only once the server has the subscriptions: without the flush, a request sent right
   * after start-up can meet "no responders". /health/ready turns 200 at that moment.
   */
  override start(callback: (err?: unknown) => void): void {
    this.readiness
      .whenReady()
      .then(() => {
        super.start(() => undefined);
        return this.nats.connection();
      })
      .then((nc) => nc.flush())
      .then(
        () => {
          this.readiness.markServing();
          callback();
        },
        (err: unknown) => {
          if (!this.nats.stoppedBeforeConnect) callback(err);
        },
      );
  }

  /**
   * Every handler's subscriptions: per dp_type, the handler behind the tracing context and
   * the overload gate, the receipt protocol in front of it, the probe subject beside it,
   * and the subjects this process's role listens on.
   */
  override bindEvents(client: NatsConnection): void {
    for (const dpType of this.messageHandlers.keys()) {
      const receiptFor = this.receipts(dpType);
      this.subscribe(
        client,
        dpType,
        this.onCall(client, dpType, this.gated(dpType), receiptFor),
        this.onProbe(client, dpType, receiptFor),
      );
    }
  }

  /**
   * The dp_type's handler, run through the overload gate. With tracing on, a caller's
   * `traceparent` header parents the handler's spans (inside the gate: a queued call runs
   * later, outside the receiving turn).
   */
  private gated(dpType: string): NatsCallback {
    // Nest types the handler as Function; nats.js calls it as (error, msg).
    const handler = (this.getMessageHandler(dpType) as NatsCallback).bind(this);
    return this.gate.wrap(
      dpType,
      tracingEnabled()
        ? (err: Error | null, msg: Msg) =>
            withContext(contextFromNats(msg.headers), () => handler(err, msg))
        : handler,
    );
  }

  /**
   * A receipt's headers for a call space (receipts.ts): a caller that asks is told at once
   * that the call arrived, before the gate, and where to ask this process again (in the
   * caller's own space, which its permissions cover): it then knows a slow answer from a
   * request lost in transit, and an answer lost in transit is sent again. Built once per
   * space, up to MAX_RECEIPT_HEADERS of them.
   */
  private receipts(dpType: string): (space: CallSpace) => MsgHdrs {
    const built = new Map<string, MsgHdrs>();
    return (space) => {
      const key = space.kind === 'tenant' ? `t.${space.tenant}` : space.kind;
      let receipt = built.get(key);
      if (receipt) return receipt;
      receipt = headers();
      receipt.set(RECEIPT_HEADER, RECEIPT_VALUE);
      receipt.set(PROBE_HEADER, this.subjects.askAgain(dpType, space));
      if (built.size < MAX_RECEIPT_HEADERS) built.set(key, receipt);
      return receipt;
    };
  }

  /**
   * A call's arrival: with a call id, the ledger answers a call seen before (its answer
   * again, or a receipt while it runs) and tracks a new one; a caller that asks gets its
   * receipt; then the gated handler runs it.
   */
  private onCall(
    client: NatsConnection,
    dpType: string,
    gated: NatsCallback,
    receiptFor: (space: CallSpace) => MsgHdrs,
  ): NatsCallback {
    const prefix = this.config.nats.subjectPrefix;
    return (err, msg) => {
      // A call id past CallLedger.MAX_ID_CHARS is not one an honest caller sends (the
      // SDK's are 36-character UUIDs): the call runs once, without the receipt protocol.
      const rawId = msg.reply ? msg.headers?.get(CALL_HEADER) : undefined;
      const callId = rawId && CallLedger.acceptsId(rawId) ? rawId : undefined;
      // The subject's space, read once and only for the receipt protocol: the ledger key
      // and the receipt depend on it.
      const space =
        callId || (msg.reply && msg.headers?.has(RECEIPT_HEADER))
          ? spaceOf(prefix, msg.subject)
          : undefined;
      if (callId && space) {
        const key = ledgerKey(space, dpType, callId);
        const seen = this.calls.arrive(key, Number(msg.headers!.get(DEADLINE_HEADER)) || undefined);
        if (seen.kind === 'answered') {
          client.publish(msg.reply!, seen.answer.data, { headers: seen.answer.headers });
          return;
        }
        client.publish(msg.reply!, Empty, { headers: receiptFor(space) });
        if (seen.kind === 'running') return;
        msg = this.calls.track(key, msg);
      } else if (space) {
        client.publish(msg.reply!, Empty, { headers: receiptFor(space) });
      }
      gated(err, msg);
    };
  }

  /**
   * A probe subject only looks a call up: a receipt while it runs, its answer again once
   * answered, silence for a call unknown here. It never runs one, so a caller cannot use it
   * to call what its permissions do not let it call.
   */
  private onProbe(
    client: NatsConnection,
    dpType: string,
    receiptFor: (space: CallSpace) => MsgHdrs,
  ): NatsCallback {
    const prefix = this.config.nats.subjectPrefix;
    return (_err, msg) => {
      const callId = msg.reply ? msg.headers?.get(CALL_HEADER) : undefined;
      if (!callId) return;
      const space = spaceOf(prefix, msg.subject);
      const seen = this.calls.peek(ledgerKey(space, dpType, callId));
      if (seen.kind === 'answered')
        client.publish(msg.reply!, seen.answer.data, { headers: seen.answer.headers });
      else if (seen.kind === 'running')
        client.publish(msg.reply!, Empty, { headers: receiptFor(space) });
    };
  }

  /**
   * The subjects this process listens on for a dp_type (ServedSubjects, by its role). A
   * queue group's subscription is withdrawn while this process sheds, if its dp_type may
   * be shed.
   */
  private subscribe(
    client: NatsConnection,
    dpType: string,
    callback: NatsCallback,
    probed: NatsCallback,
  ): void {
    const queue = this.config.nats.queueGroup;
    const { shared, own, probes } = this.subjects.of(dpType);
    for (const subject of shared) {
      const subscribe = () => client.subscribe(subject, { queue, callback });
      if (sheddable(dpType)) this.membership.add(subscribe);
      else this.sharedSubs.push(subscribe());
    }
    for (const subject of own) client.subscribe(subject, { callback });
    for (const subject of probes) client.subscribe(subject, { callback: probed });
  }

  /**
   * Our patterns are plain dp_type strings, so the handler is a Map lookup. Nest's default
   * first tries JSON.parse on the pattern and catches the throw, on every message: ~9% of
   * the service's CPU in the wait_metadata benchmark (bench/results/wait-metadata-nats.md).
   */
  override getHandlerByPattern(pattern: string): ReturnType<ServerNats['getHandlerByPattern']> {
    return this.messageHandlers.get(pattern) ?? null;
  }

  /**
   * The first step of a shutdown (before the metadata registry fails its pending waits
   * with 503 shutting_down, and before the NATS drain): out of every queue group, so the
   * NATS server gives new calls on the shared subjects to the other instances instead of
   * to a process that would refuse them. The start-up bench saw 318 such refusals in 50
   * stops before this. Calls already received are answered; this instance's own and rank
   * subjects, where owner routing reaches its staged embeddings, stay until the drain.
   * Bounded: with NATS unreachable, the shutdown goes on after SHUTDOWN_LEAVE_MS.
   */
  async onModuleDestroy(): Promise<void> {
    const drains = [
      this.membership.leaveForGood(),
      ...this.sharedSubs.splice(0).map((s) => s.drain().catch(() => undefined)),
    ];
    await withTimeout(Promise.all(drains), SHUTDOWN_LEAVE_MS, () => new Error('timed out')).catch(
      (err: unknown) =>
        this.log.warn(
          { err: (err as Error).message },
          'leaving the queue groups at shutdown did not complete',
        ),
    );
  }

  /** NatsConnectionService already watches and logs the connection's status. */
  override async handleStatusUpdates(): Promise<void> {}

  /**
   * Subscriptions live as long as the shared connection, whose drain at shutdown lets
   * in-flight handlers answer before it closes; unsubscribing here would drop them. A
   * process out of the queue group (shedding) stays out.
   */
  override close(): Promise<void> {
    this.membership.close();
    this.calls.close();
    return Promise.resolve();
  }
}
