import type { Endpoint } from '../common/kernel';
import type { Ack, FrameHeader } from './frame';

export type { Endpoint } from '../common/kernel';

export const endpointKey = (e: Endpoint) => `${e.host}:${e.port}`;

/** Parses `host:port` or `tcp://host:port` (IPv6 as `[::1]:port`). */
export function parseEndpoint(value: string): Endpoint | undefined {
  const m = /^(?:tcp:\/\/)?(\[[^\]]+\]|[^:/\s]+):(\d{1,5})\/?$/.exec(value.trim());
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/** Delivers one frame and resolves with the receiver's ack (DI token; TCP in production, fakes in tests). */
export abstract class EmbeddingTransport {
  /** Connections (TCP) or sockets (ZMQ) open to receivers. */
  get openConnections(): number {
    return 0;
  }

  /**
   * True when `send` calls its `written` callback: once, when the transport no longer
   * reads `payload`, which may be after the send settled (a frame whose receiver refused
   * it early, or whose caller gave up, may still be on its way out). A transport without
   * it must not read `payload` once its send has settled.
   */
  get reportsWrites(): boolean {
    return false;
  }

  abstract send(
    endpoint: Endpoint,
    header: FrameHeader,
    payload: Uint8Array,
    deadline: number,
    /** Aborts the send: the frame's wait for its ack ends, and its connection is freed. */
    signal?: AbortSignal,
    /** See `reportsWrites`. */
    written?: () => void,
  ): Promise<Ack>;
}
