import { createServer, type Server, type Socket } from 'node:net';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { BufferPool } from './buffer-pool';
import { MAX_HEADER_BYTES, validateHeader, type FrameHeader } from './frame';
import { npyHeader } from './npy';

export interface ReceivedFrame {
  header: FrameHeader;
  /** The payload. It lives in a pooled buffer: valid until the callback's promise settles; copy to keep. */
  data: Buffer;
  /** `host:port` of the sender. */
  from: string;
}

export interface ReceiverOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Called once per valid frame before it is acked; a throw becomes a negative ack. */
  onFrame?: (frame: ReceivedFrame) => void | Promise<void>;
  /** Also (or instead) write each embedding to `<dir>/<req_id>.part<part_idx>.npy`. */
  outputDir?: string;
  /** Largest payload accepted; larger frames are refused and the connection closed. */
  maxFrameBytes?: number;
}

type Phase =
  | { kind: 'length' }
  | { kind: 'header'; length: number }
  | { kind: 'body'; header: FrameHeader; body: Buffer; filled: number; valid?: string };

/**
 * The reference receiver: the stand-in for a prefill/decode scheduler that tests,
 * benchmarks and users run. It reads frames into pooled buffers, checks byte_length
 * against shape and dtype, hands each embedding to a callback and/or writes it as .npy,
 * and acks every frame with one JSON line.
 */
export class ReferenceReceiver {
  readonly pool = new BufferPool();
  private readonly sockets = new Set<Socket>();
  frames = 0;
  bytes = 0;

  private constructor(
    private readonly server: Server,
    private readonly options: ReceiverOptions,
  ) {}

  static async start(options: ReceiverOptions = {}): Promise<ReferenceReceiver> {
    const server = createServer();
    const receiver = new ReferenceReceiver(server, options);
    server.on('connection', (s) => receiver.serve(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
    });
    return receiver;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  get endpoint(): string {
    return `${this.options.host ?? '127.0.0.1'}:${this.port}`;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: Socket): void {
    this.sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const from = `${socket.remoteAddress}:${socket.remotePort}`;
    const maxFrame = this.options.maxFrameBytes ?? 4 * 1024 ** 3;
    let phase: Phase = { kind: 'length' };
    let pending: Buffer = Buffer.alloc(0);
    let busy = Promise.resolve();

    let refused = false;
    const ack = (body: object) => socket.write(`${JSON.stringify(body)}\n`);
    // The stream cannot be resynchronised after a bad header: answer, close, ignore the rest.
    const refuse = (error: string) => {
      refused = true;
      ack({ ok: false, error });
      socket.end();
    };

    socket.on('data', (chunk: Buffer) => {
      if (refused) return;
      let buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      pending = Buffer.alloc(0);
      while (buf.length > 0) {
        if (phase.kind === 'length') {
          if (buf.length < 4) break;
          const length = buf.readUInt32BE(0);
          buf = buf.subarray(4);
          if (length === 0 || length > MAX_HEADER_BYTES)
            return refuse(`header length ${length} is out of range`);
          phase = { kind: 'header', length };
        } else if (phase.kind === 'header') {
          if (buf.length < phase.length) break;
          let header: FrameHeader;
          try {
            header = JSON.parse(buf.subarray(0, phase.length).toString('utf8')) as FrameHeader;
          } catch {
            return refuse('header is not valid JSON');
          }
          buf = buf.subarray(phase.length);
          const problem = validateHeader(header);
          const size = Number.isInteger(header?.byte_length) ? header.byte_length : -1;
          if (size < 0 || size > maxFrame)
            return refuse(problem ?? `frame of ${size} bytes exceeds ${maxFrame}`);
          phase = {
            kind: 'body',
            header,
            body: this.pool.acquire(size),
            filled: 0,
            valid: problem,
          };
        } else {
          const take = Math.min(buf.length, phase.body.length - phase.filled);
          buf.copy(phase.body, phase.filled, 0, take);
          phase.filled += take;
          buf = buf.subarray(take);
        }
        if (phase.kind === 'body' && phase.filled === phase.body.length) {
          const done = phase;
          phase = { kind: 'length' };
          // Frames are acked in order; the next one waits for this one's callback.
          socket.pause();
          busy = busy
            .then(() => this.deliver(done.header, done.body, from, done.valid, ack))
            .finally(() => socket.resume());
        }
      }
      if (buf.length > 0) pending = Buffer.from(buf);
    });
  }

  private async deliver(
    header: FrameHeader,
    body: Buffer,
    from: string,
    invalid: string | undefined,
    ack: (b: object) => void,
  ): Promise<void> {
    try {
      if (invalid) return ack({ req_id: header.req_id, ok: false, error: invalid });
      await this.options.onFrame?.({ header, data: body, from });
      if (this.options.outputDir && !header.error_msg) await this.writeNpy(header, body);
      this.frames++;
      this.bytes += body.length;
      ack({ req_id: header.req_id, ok: true });
    } catch (err) {
      ack({ req_id: header.req_id, ok: false, error: (err as Error).message });
    } finally {
      this.pool.release(body);
    }
  }

  private async writeNpy(header: FrameHeader, body: Buffer): Promise<void> {
    const safe = header.req_id.replace(/[^A-Za-z0-9_.-]/g, '_');
    const fh = await open(join(this.options.outputDir!, `${safe}.part${header.part_idx}.npy`), 'w');
    try {
      await fh.write(npyHeader(header.shape, header.dtype));
      await fh.write(body);
    } finally {
      await fh.close();
    }
  }
}
