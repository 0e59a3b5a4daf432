/**
 * The raw loopback-TCP baseline for the send benchmark, as two processes:
 *   raw-tcp receiver <max-bytes>        prints its port, reads frames into ONE reused buffer, acks each
 *   raw-tcp sender <port> <bytes>       for each number n read on stdin, sends n frames of <bytes>
 *                                       (each waiting for its ack) and prints their times (ms) as JSON
 * Both stay up between batches, so the baseline is as warm as the service path.
 * Same frame format as the service's data plane (docs/contract.md §5).
 */
import { createServer, connect, type Socket } from 'node:net';
import { encodeHeader, type FrameHeader } from '../src/transfer/frame';

function receiver(maxBytes: number): void {
  const server = createServer((s: Socket) => {
    const body = Buffer.allocUnsafe(maxBytes);
    let stage: 'len' | 'hdr' | 'body' = 'len';
    let hdrLen = 0;
    let need = 0;
    let filled = 0;
    let reqId = '';
    let pending = Buffer.alloc(0);
    s.setNoDelay(true);
    s.on('data', (chunk: Buffer) => {
      let buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      pending = Buffer.alloc(0);
      while (buf.length) {
        if (stage === 'len') {
          if (buf.length < 4) break;
          hdrLen = buf.readUInt32BE(0);
          buf = buf.subarray(4);
          stage = 'hdr';
        } else if (stage === 'hdr') {
          if (buf.length < hdrLen) break;
          const h = JSON.parse(buf.subarray(0, hdrLen).toString()) as FrameHeader;
          reqId = h.req_id;
          need = h.byte_length;
          filled = 0;
          buf = buf.subarray(hdrLen);
          stage = 'body';
        } else {
          const take = Math.min(buf.length, need - filled);
          buf.copy(body, filled, 0, take);
          filled += take;
          buf = buf.subarray(take);
          if (filled === need) {
            s.write(`${JSON.stringify({ req_id: reqId, ok: true })}\n`);
            stage = 'len';
          }
        }
      }
      if (buf.length) pending = Buffer.from(buf);
    });
  });
  server.listen(0, '127.0.0.1', () =>
    process.stdout.write(`${(server.address() as { port: number }).port}\n`),
  );
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
}

async function sender(port: number, bytes: number): Promise<void> {
  const payload = Buffer.alloc(bytes, 1);
  const header = encodeHeader({
    req_id: 'raw',
    part_idx: 0,
    num_parts: 1,
    shape: [bytes / 4096, 1024],
    dtype: 'float32',
    byte_length: bytes,
    session_id: null,
    buffer_address: null,
  });
  const sock = connect({ host: '127.0.0.1', port });
  sock.setNoDelay(true);
  await new Promise((r) => sock.once('connect', r));
  let waiting: (() => void) | undefined;
  let lines = '';
  sock.on('data', (d: Buffer) => {
    lines += d.toString();
    while (lines.includes('\n')) {
      lines = lines.slice(lines.indexOf('\n') + 1);
      waiting?.();
    }
  });
  const batch = async (n: number) => {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const acked = new Promise<void>((r) => (waiting = r));
      const t0 = process.hrtime.bigint();
      sock.cork();
      sock.write(header);
      sock.write(payload);
      sock.uncork();
      await acked;
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    process.stdout.write(`${JSON.stringify(times)}\n`);
  };
  process.stdout.write('ready\n');
  let input = '';
  let queue = Promise.resolve();
  process.stdin.on('data', (d: Buffer) => {
    input += d.toString();
    for (let nl = input.indexOf('\n'); nl >= 0; nl = input.indexOf('\n')) {
      const n = Number(input.slice(0, nl));
      input = input.slice(nl + 1);
      queue = queue.then(() => batch(n));
    }
  });
  process.stdin.once('end', () => void queue.then(() => sock.destroy()));
}

const [mode, a, b] = process.argv.slice(2);
if (mode === 'receiver') receiver(Number(a));
else if (mode === 'sender') void sender(Number(a), Number(b));
else throw new Error('usage: raw-tcp receiver <max-bytes> | sender <port> <bytes>');
