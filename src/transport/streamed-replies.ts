import { createInbox, headers, type Msg, type NatsConnection } from '@nats-io/transport-node';

const KIND = 'Epd-Cache';
const CHUNK = 'Epd-Chunk';
/** Room left in each message for its headers and protocol line. */
const HEADROOM = 4096;

/** One message of a streamed answer. */
export interface StreamedMessage {
  /** What it is (the sender's word: `planned`, `chunk`, …); undefined for NATS' own status. */
  kind?: string;
  /** A chunk's index, when the sender numbered it. */
  chunk?: number;
  data: Uint8Array;
  /** NATS answered for the server: nobody listens on the subject asked. */
  noResponders: boolean;
  json<T>(): T;
}

/** Sends one message of an answer to the asker: its kind, bytes, and a chunk's index. */
export type StreamSend = (kind: string, data?: Uint8Array, chunk?: number) => void;

/**
 * Answers that are a stream of binary messages to the asker's inbox rather than one reply
 * (a Nest pattern answers once, in JSON): the cache's peer fetches, whose rows go in chunks
 * that fit the server's max_payload, after a token count and heartbeats. Raw NATS, kept
 * here so that features use no NATS client themselves.
 */
export class StreamedReplies {
  constructor(private readonly nc: NatsConnection) {}

  /** The largest chunk a message can carry on this connection (its max_payload, less headers). */
  get chunkBytes(): number {
    return Math.max(1024, (this.nc.info?.max_payload ?? 1_048_576) - HEADROOM);
  }

  /**
   * Serves requests on `subject`: `handle` gets each request's body and a `send` to its
   * asker (requests without a reply inbox are dropped). Returns the way to stop serving.
   */
  serve(subject: string, handle: (body: Uint8Array, send: StreamSend) => void): () => void {
    const sub = this.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        const reply = msg.reply;
        handle(msg.data, (kind, data, chunk) => {
          const h = headers();
          h.set(KIND, kind);
          if (chunk !== undefined) h.set(CHUNK, String(chunk));
          this.nc.publish(reply, data ?? new Uint8Array(0), { headers: h });
        });
      },
    });
    return () => sub.unsubscribe();
  }

  /**
   * Asks on `subject` with `body`; every message of the answer goes to `onMessage`, and
   * `onError` is told when the subscription fails, until the returned stop is called.
   * Throws when the connection is closed or draining.
   */
  ask(
    subject: string,
    body: Uint8Array,
    onMessage: (m: StreamedMessage) => void,
    onError: (err: Error) => void,
  ): () => void {
    const inbox = createInbox();
    const sub = this.nc.subscribe(inbox, {
      callback: (err, msg) => (err ? onError(err) : onMessage(messageOf(msg))),
    });
    try {
      this.nc.publish(subject, body, { reply: inbox });
    } catch (err) {
      sub.unsubscribe();
      throw err;
    }
    return () => sub.unsubscribe();
  }
}

function messageOf(msg: Msg): StreamedMessage {
  const kind = msg.headers?.get(KIND) || undefined;
  const chunk = msg.headers?.get(CHUNK);
  return {
    ...(kind ? { kind } : {}),
    ...(chunk ? { chunk: Number(chunk) } : {}),
    data: msg.data,
    noResponders: !kind && msg.headers?.code === 503,
    json: <T>() => msg.json<T>(),
  };
}
