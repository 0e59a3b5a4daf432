import { waitFor } from '../../test/support/wait';
import { Clock } from '../common/clock';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEndpoint } from './embedding-transport';
import type { FrameHeader } from './frame';
import { ReferenceReceiver, type ReceivedFrame } from './reference-receiver';
import { TcpEmbeddingSender } from './tcp-sender.service';

const header = (reqId: string, rows: number, dim = 4): FrameHeader => ({
  req_id: reqId,
  part_idx: 0,
  num_parts: 1,
  shape: [rows, dim],
  dtype: 'float32',
  byte_length: rows * dim * 4,
  session_id: null,
  buffer_address: null,
});

describe('data plane: TCP sender and reference receiver', () => {
  let sender: TcpEmbeddingSender;
  beforeEach(() => (sender = new TcpEmbeddingSender(new Clock())));
  afterEach(() => sender.onApplicationShutdown());

  it('delivers header and bytes intact, acks, and reuses one connection per endpoint', async () => {
    const got: { header: FrameHeader; sum: number; first: number }[] = [];
    const rx = await ReferenceReceiver.start({
      onFrame: (f: ReceivedFrame) => {
        const v = new Float32Array(f.data.buffer, f.data.byteOffset, f.data.length / 4);
        got.push({ header: f.header, sum: v.reduce((a, b) => a + b, 0), first: v[0]! });
      },
    });
    try {
      const ep = { host: '127.0.0.1', port: rx.port };
      for (let i = 1; i <= 3; i++) {
        const data = new Float32Array(1000 * 4).fill(i);
        const ack = await sender.send(
          ep,
          header(`r${i}`, 1000),
          new Uint8Array(data.buffer),
          Date.now() + 5000,
        );
        expect(ack).toEqual({ req_id: `r${i}`, ok: true });
      }
      expect(got.map((g) => [g.header.req_id, g.sum, g.first])).toEqual([
        ['r1', 4000, 1],
        ['r2', 8000, 2],
        ['r3', 12000, 3],
      ]);
      expect(sender.openConnections).toBe(1);
      expect(rx.pool.idleBytes).toBeGreaterThan(0); // buffers went back to the pool
    } finally {
      await rx.close();
    }
  });

  it('pipelines concurrent frames to one endpoint and matches acks in order', async () => {
    const rx = await ReferenceReceiver.start({
      onFrame: () => new Promise((r) => setTimeout(r, 5)),
    });
    try {
      const ep = { host: '127.0.0.1', port: rx.port };
      const acks = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          sender.send(ep, header(`p${i}`, 256), new Uint8Array(256 * 16), Date.now() + 5000),
        ),
      );
      expect(acks.map((a) => a.req_id)).toEqual(Array.from({ length: 10 }, (_, i) => `p${i}`));
      expect(sender.openConnections).toBe(1);
    } finally {
      await rx.close();
    }
  });

  it('turns a negative ack into an error naming the receiver and the reason, and keeps serving', async () => {
    const rx = await ReferenceReceiver.start({
      onFrame: (f) => {
        if (f.header.req_id === 'no') throw new Error('no room for it');
      },
    });
    try {
      const ep = { host: '127.0.0.1', port: rx.port };
      await expect(
        sender.send(ep, header('no', 2), new Uint8Array(32), Date.now() + 5000),
      ).rejects.toThrow(`receiver 127.0.0.1:${rx.port} refused req_id=no: no room for it`);
      const bad = { ...header('bad', 2), byte_length: 31 };
      await expect(sender.send(ep, bad, new Uint8Array(31), Date.now() + 5000)).rejects.toThrow(
        /byte_length 31 does not match shape \[2, 4\] of float32 \(32 bytes\)/,
      );
      await expect(
        sender.send(ep, header('yes', 2), new Uint8Array(32), Date.now() + 5000),
      ).resolves.toMatchObject({ ok: true });
    } finally {
      await rx.close();
    }
  });

  it('fails clearly when the receiver closes without acking, refuses the connection, or is too slow', async () => {
    const closer = createServer((s) => s.once('data', () => s.destroy()));
    await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
    const silent = createServer((s) => s.on('data', () => undefined));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const p1 = (closer.address() as { port: number }).port;
      await expect(
        sender.send(
          { host: '127.0.0.1', port: p1 },
          header('c', 1),
          new Uint8Array(16),
          Date.now() + 5000,
        ),
      ).rejects.toThrow(/closed the connection before acking/);
      const free = await new Promise<number>((r) => {
        const s = createServer().listen(0, '127.0.0.1', () => {
          const port = (s.address() as { port: number }).port;
          s.close(() => r(port));
        });
      });
      await expect(
        sender.send(
          { host: '127.0.0.1', port: free },
          header('x', 1),
          new Uint8Array(16),
          Date.now() + 5000,
        ),
      ).rejects.toThrow(/could not connect to 127\.0\.0\.1:\d+: .*ECONNREFUSED/);
      const p2 = (silent.address() as { port: number }).port;
      await expect(
        sender.send(
          { host: '127.0.0.1', port: p2 },
          header('s', 1),
          new Uint8Array(16),
          Date.now() + 200,
        ),
      ).rejects.toThrow(/no ack from .* within \d+ ms/);
      expect(sender.openConnections).toBe(0);
    } finally {
      closer.close();
      silent.close();
    }
  });

  it('calls `written` once per send, when the socket is done with the payload: after an ack, a refused connection, or a stalled receiver dropped at the deadline', async () => {
    expect(sender.reportsWrites).toBe(true);
    const rx = await ReferenceReceiver.start();
    const stalled = createServer((s) => s.pause()); // never reads: the write cannot finish
    await new Promise<void>((r) => stalled.listen(0, '127.0.0.1', r));
    const counted = () => {
      const c = { n: 0, fn: () => void c.n++ };
      return c;
    };
    try {
      const ok = counted();
      await sender.send(
        { host: '127.0.0.1', port: rx.port },
        header('w', 1000),
        new Uint8Array(16_000),
        Date.now() + 5000,
        undefined,
        ok.fn,
      );
      expect(ok.n).toBe(1);
      const refused = counted();
      await expect(
        sender.send(
          { host: '127.0.0.1', port: 1 },
          header('r', 1),
          new Uint8Array(16),
          Date.now() + 5000,
          undefined,
          refused.fn,
        ),
      ).rejects.toThrow(/could not connect/);
      expect(refused.n).toBe(1);
      // 64 MB into a receiver that reads nothing: still being written when the send fails.
      const big = counted();
      const port = (stalled.address() as { port: number }).port;
      await expect(
        sender.send(
          { host: '127.0.0.1', port },
          header('big', 4 * 1024 * 1024),
          new Uint8Array(64 * 1024 * 1024),
          Date.now() + 300,
          undefined,
          big.fn,
        ),
      ).rejects.toThrow(/no ack/);
      // The connection was destroyed with the write pending: its callback still runs.
      await waitFor(() => big.n >= 1, 2000);
      expect(big.n).toBe(1);
    } finally {
      await rx.close();
      stalled.close();
    }
  });

  it('writes .npy files numpy can read (header, shape, bytes)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'epd-npy-'));
    const rx = await ReferenceReceiver.start({ outputDir: dir });
    try {
      const data = Float32Array.from({ length: 12 }, (_, i) => i);
      await sender.send(
        { host: '127.0.0.1', port: rx.port },
        { ...header('a/b', 3), part_idx: 2 },
        new Uint8Array(data.buffer),
        Date.now() + 5000,
      );
      // Read back by numpy itself (Debian's python3-numpy), not by a regex on our header.
      const python = execFileSync('sh', ['-c', 'command -p -v python3'], {
        encoding: 'utf8',
      }).trim();
      const read = execFileSync(
        python,
        [
          '-c',
          'import json, sys, numpy as np; a = np.load(sys.argv[1]); ' +
            'print(json.dumps({"dtype": str(a.dtype), "shape": list(a.shape), "values": a.ravel().tolist()}))',
          join(dir, 'a_b.part2.npy'),
        ],
        { encoding: 'utf8' },
      );
      expect(JSON.parse(read)).toEqual({
        dtype: 'float32',
        shape: [3, 4],
        values: Array.from(data),
      });
    } finally {
      await rx.close();
    }
  });

  it('parses endpoints', () => {
    expect(parseEndpoint('127.0.0.1:9000')).toEqual({ host: '127.0.0.1', port: 9000 });
    expect(parseEndpoint('tcp://host.example:1')).toEqual({ host: 'host.example', port: 1 });
    expect(parseEndpoint('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(parseEndpoint('nope')).toBeUndefined();
    expect(parseEndpoint('h:70000')).toBeUndefined();
  });
});
