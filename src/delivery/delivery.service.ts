import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { withTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { endpointKey, parseEndpoint, type Endpoint } from '../transfer/embedding-transport';
import type { DestinationView, RegisterRequest, SendRequest, SendStatus } from './delivery.schema';
import {
  ReqStateStore,
  type Destination,
  type RecentFailure,
  type ReqState,
} from '../requests/req-state.store';
import { RequestLifecycle } from '../requests/request-lifecycle.service';
import { DestinationPolicy } from './destination-policy';
import { DeliveryWire } from './delivery-wire';
import { embeddingFrame, errorFrame } from './frames';

/**
 * The delivery in flight to one destination, shared by concurrent requests for it, and who
 * still waits for it: callers that can go away (HTTP) are counted, callers that cannot
 * (NATS, registered pushes, the encode reply) pin it. When the last counted caller leaves
 * and nothing pins it, the delivery is aborted.
 */
interface Flight {
  done: Promise<void>;
  callers: number;
  pinned: boolean;
  controller: AbortController;
}

export type { DestinationView } from './delivery.schema';

export type { SendStatus } from './delivery.schema';

export function destinationViews(state: ReqState): DestinationView[] {
  return [...state.destinations.values()].map((d) => ({
    endpoint: d.key,
    status: d.status,
    source: d.source,
    deliveries: d.deliveries,
    ...(d.bytes !== undefined ? { bytes: d.bytes } : {}),
    ...(d.error ? { error: d.error } : {}),
  }));
}

/**
 * Getting staged embeddings to the receivers that need them, and never claiming a
 * delivery that did not happen:
 * - `send` delivers to the caller's endpoint once the embedding is ready (waiting for it
 *   if the encode is still running) and answers only after the receiver's ack;
 * - `register_destinations` adds a receiver, which is pushed to as soon as the embedding
 *   is ready;
 * - completion is counted per distinct destination (`host:port`): a retry from the same
 *   one is delivered again if asked, but never counted twice, and concurrent requests for
 *   the same destination share one delivery;
 * - when `receive_count` distinct destinations have acked, the request is released.
 * Without a receive_count the embedding stays until EPD_SEND_TIMEOUT_MS or an explicit
 * release; a failed delivery likewise keeps it, so the receiver can retry.
 */
@Injectable()
export class DeliveryService {
  private readonly logger = new Logger('Delivery');
  private readonly flights = new WeakMap<Destination, Flight>();
  /** HTTP callers waiting on a delivery now, and those gone before it ended. */
  readonly callerStats = { callersWaiting: 0, callersGone: 0 };

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly states: ReqStateStore,
    private readonly wire: DeliveryWire,
    private readonly lifecycle: RequestLifecycle,
    private readonly policy: DestinationPolicy,
  ) {}

  /**
   * Refuses (403) any endpoint EPD_ALLOWED_DESTINATIONS does not allow: called before an
   * encode starts for the endpoints it names, so nothing is encoded for a refused push.
   */
  async checkTargets(targets: readonly Endpoint[], reqId: string): Promise<void> {
    for (const t of targets) await this.policy.check(t, reqId);
  }

  /** `signal`: the caller went away (HTTP disconnect); the delivery stops unless others share it. */
  async send(
    req: SendRequest,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<{ req_id: string; bytes: number; acked: true }> {
    // On SGLang's wire, /send means Mooncake: an RDMA write into buffer_address.
    if (this.config.transfer.backend === 'zmq' && req.buffer_address != null)
      throw Errors.mooncakeUnsupported(req.req_id);
    const state = this.states.get(req.req_id);
    if (!state) throw Errors.noStagedEmbedding(req.req_id);
    if (state.releaseRequested) throw Errors.releasedDuringEncode(req.req_id);
    if (req.receive_count !== undefined) state.expectReceivers(req.receive_count);
    const port = Array.isArray(req.embedding_port) ? req.embedding_port[0]! : req.embedding_port;
    await this.policy.check({ host: req.prefill_host, port }, req.req_id);
    // Released, or handed to the object store at shutdown, while the policy was asked (a
    // caller that forwarded this call reads the owner record again on shutting_down).
    if (state.releaseRequested) {
      throw state.handedOff
        ? Errors.shuttingDown(req.req_id)
        : Errors.releasedDuringEncode(req.req_id);
    }
    const dest = state.addDestination({ host: req.prefill_host, port }, 'send');
    await this.deliver(state, dest, deadline, req, signal);
    return { req_id: req.req_id, bytes: dest.bytes ?? 0, acked: true };
  }

  async register(req: RegisterRequest, deadline: number): Promise<null> {
    const endpoint = parseEndpoint(req.receive_url);
    if (!endpoint) throw Errors.invalidReceiveUrl(req.receive_url, req.req_id);
    await this.policy.check(endpoint, req.req_id);
    let state = this.states.get(req.req_id);
    if (!state) {
      const failure = this.states.failureOf(req.req_id);
      if (failure) return this.lateForFailure(req.req_id, endpoint, failure);
      if (this.states.wasReleased(req.req_id)) throw Errors.notActive(req.req_id);
      state = await this.states.waitForStart(req.req_id, deadline);
      if (!state) throw Errors.startTimeout(req.req_id);
    }
    if (state.releaseRequested) throw Errors.notActive(req.req_id);
    state.expectReceivers(req.receive_count);
    const key = endpointKey(endpoint);
    if (state.destinations.has(key)) return null; // URLs accumulate as a set
    const dest = state.addDestination(endpoint, 'registered');
    // Pushed as soon as the embedding is ready; bounded by the staging TTL, not the caller.
    const pushDeadline = state.createdAt + this.config.timeouts.sendTimeoutMs;
    this.deliver(state, dest, pushDeadline).catch((err: unknown) => {
      // A failed or released encode already told this receiver (error frame); not news.
      if (state.phase === 'released') return;
      this.logger.warn(
        { req_id: req.req_id, endpoint: key, err: (err as Error).message },
        'push to registered destination failed',
      );
    });
    return null;
  }

  /**
   * After staging: the tokenizer-mode push (endpoint named in the encode request), then,
   * once a receive_count is known, wait (up to the deadline) until that many destinations
   * have registered and their pushes have ended. A missing registration or a failed push
   * is an error: never a silent 200 for a delivery that did not happen.
   */
  async afterStage(
    state: ReqState,
    targets: readonly Endpoint[],
    deadline: number,
  ): Promise<DestinationView[] | undefined> {
    if (targets.length > 0) {
      await this.checkTargets(targets, state.reqId);
      // zmq_to_tokenizer (one port) or the legacy list of ports: each one is a receiver.
      if (state.receiveCount === undefined) state.expectReceivers(targets.length);
      const dests = targets.map((t) => state.addDestination(t, 'encode'));
      const results = await Promise.allSettled(dests.map((d) => this.deliver(state, d, deadline)));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed && targets.length === 1) throw failed.reason;
    }
    const expected = state.receiveCount;
    if (expected === undefined) return undefined;
    await withTimeout(state.whenDestinations(expected), deadline - this.clock.now(), () =>
      Errors.destinationsMissing(state.reqId, state.destinations.size, expected),
    );
    const pending = [...state.destinations.values()]
      .map((d) => this.flights.get(d)?.done)
      .filter((p) => p !== undefined);
    await Promise.allSettled(pending);
    const views = destinationViews(state);
    const failed = views.filter((v) => v.status === 'failed');
    if (failed.length > 0) {
      throw Errors.deliveryIncomplete(
        state.reqId,
        failed.map((f) => `${f.endpoint}: ${f.error}`).join('; '),
      );
    }
    return views;
  }

  /**
   * The encode failed: tell every receiver that is waiting for this part (registered
   * ones and the encode request's own targets) with an error frame, as SGLang does, so
   * they fail now with the real reason instead of at their timeout. Best effort: a
   * receiver that is gone is only logged.
   */
  async failed(
    state: ReqState,
    targets: readonly Endpoint[],
    error: { message: string; code: number },
    deadline: number,
  ): Promise<void> {
    this.states.rememberFailure(state, error);
    const endpoints = new Map<string, Endpoint>();
    for (const d of state.destinations.values()) endpoints.set(d.key, d.endpoint);
    for (const t of targets) endpoints.set(endpointKey(t), t);
    const { modality, partIdx, numParts } = state;
    const header = errorFrame(state.reqId, { modality, partIdx, numParts, ...error });
    await Promise.all(
      [...endpoints].map(([key, endpoint]) =>
        this.wire.errorFrame(state.reqId, key, endpoint, header, deadline),
      ),
    );
  }

  /**
   * A registration after its encode failed: answered 200, as SGLang's encoder answers, and
   * the receiver is sent the failure's error frame, so it fails now with the encode's own
   * status and message (a 400 here would surface as "Failed to register receive URL").
   */
  private lateForFailure(reqId: string, endpoint: Endpoint, failure: RecentFailure): null {
    const deadline = this.clock.now() + this.config.timeouts.sendTimeoutMs;
    void this.wire.errorFrame(
      reqId,
      endpointKey(endpoint),
      endpoint,
      errorFrame(reqId, failure),
      deadline,
    );
    return null;
  }

  status(reqId: string): SendStatus {
    const state = this.states.get(reqId);
    if (!state) throw Errors.unknownReqId(reqId);
    return {
      req_id: reqId,
      state: state.phase,
      receive_count: state.receiveCount ?? null,
      acked: state.ackedCount,
      destinations: destinationViews(state),
    };
  }

  /**
   * One delivery to one destination; concurrent callers for the same destination share
   * it. A caller with a `signal` is answered at once when it aborts, and the delivery
   * itself is aborted (its connection freed) once no caller is left to receive the answer.
   */
  private deliver(
    state: ReqState,
    dest: Destination,
    deadline: number,
    req?: SendRequest,
    signal?: AbortSignal,
  ): Promise<void> {
    const flight = this.flights.get(dest) ?? this.takeOff(state, dest, deadline, req);
    if (!signal) {
      flight.pinned = true;
      return flight.done;
    }
    const stats = this.callerStats;
    if (signal.aborted) {
      stats.callersGone++;
      return Promise.reject(Errors.callerGone(state.reqId));
    }
    flight.callers++;
    stats.callersWaiting++;
    return new Promise<void>((resolve, reject) => {
      const leave = () => {
        stats.callersGone++;
        stats.callersWaiting--;
        flight.callers--;
        if (flight.callers === 0 && !flight.pinned) flight.controller.abort();
        reject(Errors.callerGone(state.reqId));
      };
      signal.addEventListener('abort', leave, { once: true });
      flight.done
        .finally(() => {
          if (!signal.aborted) stats.callersWaiting--;
          signal.removeEventListener('abort', leave);
        })
        .then(resolve, reject);
    });
  }

  private takeOff(state: ReqState, dest: Destination, deadline: number, req?: SendRequest): Flight {
    const controller = new AbortController();
    const done = this.deliverOnce(state, dest, deadline, controller.signal, req).finally(() =>
      this.flights.delete(dest),
    );
    const flight = { done, callers: 0, pinned: false, controller };
    this.flights.set(dest, flight);
    return flight;
  }

  private async deliverOnce(
    state: ReqState,
    dest: Destination,
    deadline: number,
    signal: AbortSignal,
    req?: SendRequest,
  ): Promise<void> {
    state.startSend(dest);
    let bytes: number;
    try {
      await this.ready(state, deadline, signal);
      const emb = state.embedding;
      if (!emb || state.releaseRequested) throw Errors.releasedDuringEncode(state.reqId);
      const header = embeddingFrame(state, emb, req);
      await this.wire.write(state.reqId, dest.key, dest.endpoint, header, emb, deadline, signal);
      bytes = emb.bytes;
    } catch (err) {
      this.states.fail(state, dest, (err as Error).message);
      throw err;
    }
    this.states.ack(state, dest, bytes);
    if (state.complete) await this.lifecycle.release(state.reqId, 'ack');
  }

  private async ready(state: ReqState, deadline: number, signal: AbortSignal): Promise<void> {
    if (state.embedding) return;
    try {
      const aborted = new Promise<never>((_, reject) =>
        signal.addEventListener('abort', () => reject(Errors.callerGone(state.reqId)), {
          once: true,
        }),
      );
      aborted.catch(() => undefined);
      await withTimeout(Promise.race([state.ready, aborted]), deadline - this.clock.now(), () =>
        Errors.embeddingWaitTimeout(state.reqId),
      );
    } catch (err) {
      if (err instanceof MMError) throw err;
      throw Errors.releasedDuringEncode(state.reqId);
    }
  }
}
