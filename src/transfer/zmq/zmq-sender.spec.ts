import { Pull } from 'zeromq';
import { Clock } from '../../common/clock';
import { loadConfig } from '../../config/config.loader';
import type { FrameHeader } from '../frame';
import { ZmqEmbeddingSender } from './zmq-sender.service';

const header = (reqId: string): FrameHeader => ({
  req_id: reqId,
  part_idx: 0,
  num_parts: 1,
  shape: [1, 2],
  dtype: 'float32',
  byte_length: 8,
  session_id: null,
  buffer_address: null,
  modality: 'image',
  grid_thw: [[1, 2, 2]],
});

describe('ZmqEmbeddingSender (real ZMQ sockets on loopback)', () => {
  const pulls: Pull[] = [];
  async function pull(host = '127.0.0.1'): Promise<{ socket: Pull; port: number }> {
    const socket = new Pull();
    await socket.bind(`tcp://${host}:*`);
    pulls.push(socket);
    return { socket, port: Number(/:(\d+)$/.exec(socket.lastEndpoint!)![1]) };
  }
  // Every sender is closed at the end, as the app closes its own: a socket monitor left
  // open keeps libzmq's context, and so Jest's process, alive (a CI run hung after the
  // unit tests passed, when the collector had not yet taken the retired monitors).
  const senders: ZmqEmbeddingSender[] = [];
  const sender = (env: Record<string, string> = {}) => {
    const s = new ZmqEmbeddingSender(
      loadConfig({ EPD_ZMQ_LINGER_MS: '0', ...env }).config,
      new Clock(),
    );
    senders.push(s);
    return s;
  };
  afterAll(() => {
    senders.forEach((s) => s.onModuleDestroy());
    pulls.forEach((p) => p.close());
  });

  it('sends two frames (pickled EmbeddingData, then the bytes) and serialises concurrent sends on one socket', async () => {
    const rx = await pull();
    const s = sender();
    const payload = new Uint8Array(new Float32Array([1.5, -2]).buffer);
    const deadline = Date.now() + 5000;
    const acks = await Promise.all(
      ['a', 'b', 'c'].map((id) =>
        s.send({ host: '127.0.0.1', port: rx.port }, header(id), payload, deadline),
      ),
    );
    expect(acks.map((a) => a.ok)).toEqual([true, true, true]);
    for (const id of ['a', 'b', 'c']) {
      const [meta, bytes] = await rx.socket.receive();
      expect(meta!.includes(Buffer.from(id))).toBe(true);
      expect(meta!.subarray(0, 2)).toEqual(Buffer.from([0x80, 2])); // pickle protocol 2
      expect(new Float32Array(new Uint8Array(bytes!).buffer)).toEqual(new Float32Array([1.5, -2]));
    }
    expect(s.openConnections).toBe(1);
    s.onModuleDestroy();
    expect(s.openConnections).toBe(0);
  });

  it('sends one frame for an error', async () => {
    const rx = await pull();
    const s = sender();
    await s.send(
      { host: '127.0.0.1', port: rx.port },
      { ...header('e'), error_msg: 'boom', error_code: 400 },
      new Uint8Array(0),
      Date.now() + 5000,
    );
    const frames = await rx.socket.receive();
    expect(frames).toHaveLength(1);
    s.onModuleDestroy();
  });

  it('fails at the deadline when nobody receives (IMMEDIATE: nothing is queued for an absent peer)', async () => {
    const s = sender();
    const started = Date.now();
    await expect(
      s.send({ host: '127.0.0.1', port: 9 }, header('x'), new Uint8Array(8), Date.now() + 300),
    ).rejects.toThrow(/no ZMTP handshake with 127.0.0.1:9 within \d+ ms: nobody listening there/);
    expect(Date.now() - started).toBeLessThan(3000);
    s.onModuleDestroy();
  });

  it('keeps at most EPD_ZMQ_MAX_SOCKETS sockets, and closes idle ones back to zero', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate'] });
    try {
      const s = sender({ EPD_ZMQ_MAX_SOCKETS: '2', EPD_ZMQ_IDLE_MS: '1000' });
      const rxs = await Promise.all([pull(), pull(), pull()]);
      for (const rx of rxs) {
        await s.send(
          { host: '127.0.0.1', port: rx.port },
          header('m'),
          new Uint8Array(8),
          Date.now() + 5000,
        );
      }
      expect(s.openConnections).toBe(2);
      jest.advanceTimersByTime(2500); // two sweeps: the first finds them exactly 1000 ms idle
      expect(s.openConnections).toBe(0);
      s.onModuleDestroy();
    } finally {
      jest.useRealTimers();
    }
  });

  // N1 (security, second pass): sockets to destinations that never took a message stayed
  // open, reconnecting, until libzmq's context limit refused every new receiver.
  it('closes the socket of a failed send: nothing stays reconnecting to a destination that took nothing', async () => {
    const s = sender();
    await expect(
      s.send({ host: '127.0.0.1', port: 9 }, header('x'), new Uint8Array(8), Date.now() + 100),
    ).rejects.toThrow(/no ZMTP handshake with/);
    await new Promise((r) => setImmediate(r));
    expect(s.openConnections).toBe(0);
    s.onModuleDestroy();
  });

  it('keeps at most EPD_ZMQ_MAX_SOCKETS_PER_HOST to one host, and other hosts keep theirs', async () => {
    const s = sender({ EPD_ZMQ_MAX_SOCKETS_PER_HOST: '2' });
    const other = await pull('127.0.0.2');
    const ok = (port: number, host = '127.0.0.1') =>
      s.send({ host, port }, header('h'), new Uint8Array(8), Date.now() + 5000);
    await ok(other.port, '127.0.0.2');
    const local = await Promise.all([pull(), pull(), pull()]);
    for (const rx of local) await ok(rx.port);
    expect(s.openConnections).toBe(3); // two to 127.0.0.1, one to 127.0.0.2
    await ok(other.port, '127.0.0.2'); // still open: reused, not reconnected
    expect(s.openConnections).toBe(3);
    s.onModuleDestroy();
  });

  it('makes room by closing the least recently used socket at once, failing what was queued on it', async () => {
    const s = sender({ EPD_ZMQ_MAX_SOCKETS: '2', EPD_ZMQ_MAX_SOCKETS_PER_HOST: '2' });
    const deadline = Date.now() + 5000;
    // Two sends held on sockets to ports nobody listens on (IMMEDIATE: they wait).
    const held = [9, 11].map((port) =>
      s.send({ host: '127.0.0.1', port }, header(`held-${port}`), new Uint8Array(8), deadline),
    );
    const failures = held.map((p) => p.catch((e: Error) => e.message));
    const rx = await pull('127.0.0.2');
    const started = Date.now();
    const ack = await s.send(
      { host: '127.0.0.2', port: rx.port },
      header('real'),
      new Uint8Array(8),
      deadline,
    );
    expect(ack.ok).toBe(true);
    expect(await failures[0]).toMatch(
      /^send to 127\.0\.0\.1:9 abandoned: 2 sockets \(EPD_ZMQ_MAX_SOCKETS\) were open/,
    );
    expect(Date.now() - started).toBeLessThan(2000); // at once, not at the held send's deadline
    expect(s.openConnections).toBe(2);
    s.onModuleDestroy();
    await failures[1];
  });
});
