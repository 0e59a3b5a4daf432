import { createServer, type Server } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Pull } from 'zeromq';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall } from './support/calls';
import { dataUri, image } from './support/media';
import { expectOk } from './support/wait';

/**
 * N6 (security, second pass): with EPD_TRANSFER_BACKEND=zmq, a TCP listener that is not a
 * ZMQ receiver but writes first (an HTTP server answering "400 Bad Request") received the
 * whole pickled frame, and the send answered 200 `acked: true`. libzmq takes a peer whose
 * first byte is not ZMTP's 0xFF for a ZMTP 1.0 peer and sends to it without a handshake.
 * A delivery now counts only after the ZMTP handshake with that peer.
 */
describe('N6: a send to a peer that never spoke ZMTP (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let http: Server;
  let httpPort: number;
  let received = 0;

  beforeAll(async () => {
    t = await startTestApp({ EPD_TRANSFER_BACKEND: 'zmq' });
    nc = await connect({ servers: sharedNatsUrl() });
    http = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.write('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      socket.on('data', (d: Buffer) => (received += d.length));
    });
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    httpPort = (http.address() as { port: number }).port;
  });

  afterAll(async () => {
    await nc.drain();
    await t.close();
    await new Promise((r) => http.close(r));
  });

  it('is not reported acked, names the reason, and sends the peer nothing but the greeting', async () => {
    const png = dataUri(await image(56, 56), 'image/png');
    expectOk(await natsCall(nc, t, 'encode', encodeBody('n6', [png])));
    const sendTo = (port: number, timeoutMs: number) =>
      natsCall(nc, t, 'send', {
        req_id: 'n6',
        prefill_host: '127.0.0.1',
        embedding_port: port,
        timeout_ms: timeoutMs,
      });
    const started = Date.now();
    const reply = await sendTo(httpPort, 1500);
    expect(reply.response).toBeUndefined();
    expect(reply.err?.message).toMatch(/no ZMTP handshake with 127\.0\.0\.1:\d+ within/);
    expect(Date.now() - started).toBeLessThan(5000);
    // ZMTP's 10-byte greeting went out; no frame did (before the fix: 1,026+ bytes).
    expect(received).toBeLessThanOrEqual(64);

    // The same embedding still reaches a real ZMQ receiver afterwards.
    const rx = new Pull();
    await rx.bind('tcp://127.0.0.1:*');
    const port = Number(/:(\d+)$/.exec(rx.lastEndpoint!)![1]);
    const frames = rx.receive();
    const ok = await sendTo(port, 5000);
    expect(ok.response).toMatchObject({ req_id: 'n6', acked: true });
    expect((await frames).length).toBe(2);
    rx.close();
  });
});
