import { performance } from 'node:perf_hooks';
import { Injectable, Logger } from '@nestjs/common';
import { Errors } from '../common/errors/error-catalogue';
import { LifecycleEvents } from '../common/lifecycle-events';
import type { SlabSlot } from '../common/kernel';
import { AppConfig } from '../config/app-config';
import { inSpan, SpanKind } from '../tracing/tracing';
import { EmbeddingTransport, type Endpoint } from '../transfer/embedding-transport';
import type { FrameHeader } from '../transfer/frame';
import type { StagedEmbedding } from '../requests/req-state.store';
import { DestinationPolicy } from './destination-policy';

/**
 * The wire side of a delivery: one frame written to one receiver and its ack awaited, in a
 * span, counted (epd_encoder_sends_total, _sent_bytes_total) and told as `send.completed`;
 * and the best-effort error frame. Which destinations, when, and what their acks mean is
 * the DeliveryService's.
 */
@Injectable()
export class DeliveryWire {
  private readonly logger = new Logger('Delivery');
  /** Deliveries by outcome, and the bytes of the acked ones. */
  readonly stats = { acked: 0, failed: 0, bytes: 0 };

  constructor(
    private readonly config: AppConfig,
    private readonly transport: EmbeddingTransport,
    private readonly policy: DestinationPolicy,
    private readonly events: LifecycleEvents,
  ) {}

  /**
   * Writes `emb` to `key` and waits for the ack. Its slab slot, if it has one, stays held
   * while the transport may still read it: a release or an expiry meanwhile must not hand
   * its bytes to another request. Throws `delivery_failed`.
   */
  async write(
    reqId: string,
    key: string,
    endpoint: Endpoint,
    header: FrameHeader,
    emb: StagedEmbedding,
    deadline: number,
    signal: AbortSignal,
  ): Promise<void> {
    const written = holdWhileWriting(emb.slot);
    const payload = new Uint8Array(emb.data.buffer, emb.data.byteOffset, emb.data.byteLength);
    const since = performance.now();
    try {
      await inSpan(
        'send',
        {
          'epd.req_id': reqId,
          'epd.endpoint': key,
          'epd.bytes': emb.bytes,
          'epd.backend': this.config.transfer.backend,
        },
        async () => {
          try {
            await this.transport.send(endpoint, header, payload, deadline, signal, written);
          } catch (err) {
            this.sent('failed', since);
            throw Errors.deliveryFailed(key, (err as Error).message, reqId);
          }
          this.sent('acked', since);
          this.stats.bytes += emb.bytes;
        },
        SpanKind.CLIENT,
      );
    } finally {
      // A transport that does not report its writes is done with the payload once the
      // send settles (and the callback drops the slot once, whoever calls it first).
      if (!this.transport.reportsWrites) written?.();
    }
  }

  /** Best effort: a receiver that is gone, or that the policy refuses, is only logged. */
  async errorFrame(
    reqId: string,
    key: string,
    endpoint: Endpoint,
    header: FrameHeader,
    deadline: number,
  ): Promise<void> {
    // An endpoint the policy refuses hears nothing, not even that the encode failed.
    if (!(await this.policy.allows(endpoint))) return;
    await this.transport
      .send(endpoint, header, new Uint8Array(0), deadline)
      .catch((err: unknown) =>
        this.logger.warn(
          { req_id: reqId, endpoint: key, err: (err as Error).message },
          'could not deliver the error frame',
        ),
      );
  }

  private sent(outcome: 'acked' | 'failed', since: number): void {
    this.stats[outcome]++;
    this.events.emit('send.completed', outcome, (performance.now() - since) / 1000);
  }
}

/**
 * Holds `slot` for one send: the callback the transport calls when it is done with the
 * payload drops it (once).
 */
function holdWhileWriting(slot: SlabSlot | undefined): (() => void) | undefined {
  if (!slot) return undefined;
  slot.hold();
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    slot.drop();
  };
}
