import { expectOk } from './support/wait';
import { readdirSync } from 'node:fs';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Pull } from 'zeromq';
import { EmbeddingTransport } from '../src/transfer/embedding-transport';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall } from './support/calls';
import { dataUri, image } from './support/media';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehind } from './support/ledger';

/**
 * N1 (security, second pass), zmq-socket-exhaustion: with EPD_TRANSFER_BACKEND=zmq, sends
 * to 1,100 unreachable ports (20 at a time, 200 ms each; no credentials needed) left 1,023
 * PUSH sockets reconnecting for EPD_ZMQ_IDLE_MS, and libzmq's context limit then failed
 * every send to a new, real receiver with 500 "Too many open file descriptors" for up to
 * five minutes. The probe's input, then a real receiver.
 */
describe('N1: a flood of unreachable ZMQ destinations (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  beforeAll(async () => {
    t = await startTestApp({ EPD_TRANSFER_BACKEND: 'zmq', EPD_SEND_TIMEOUT_MS: '120000' });
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    await nc.drain();
    await t.close();
  });

  const fds = () => readdirSync('/proc/self/fd').length;

  it('leaves no socket behind, and a new real receiver still gets its embedding', async () => {
    const png = dataUri(await image(56, 56), 'image/png');
    // Two staged req_ids, so that the per-request bound of 1,024 destinations is not what
    // stops the flood.
    for (const id of ['n1-a', 'n1-b', 'n1-real'])
      expectOk(await natsCall(nc, t, 'encode', encodeBody(id, [png])));
    const sender = t.app.get(EmbeddingTransport);
    const fdsBefore = fds();

    const FLOOD = 1100;
    const AT_ONCE = 20;
    let next = 20_000;
    const ledger = new CallLedger();
    let mostOpen = 0;
    const worker = async () => {
      while (next < 20_000 + FLOOD) {
        const port = next++;
        await ledger.nats('send to an unreachable port', 200, () =>
          natsCall(nc, t, 'send', {
            req_id: port % 2 ? 'n1-a' : 'n1-b',
            prefill_host: '127.0.0.1',
            embedding_port: port,
            timeout_ms: 200,
          }),
        );
        mostOpen = Math.max(mostOpen, sender.openConnections);
      }
    };
    await Promise.all(Array.from({ length: AT_ONCE }, worker));
    // A new, real receiver gets its embedding (before the fix: 500, 0 bytes).
    const rx = new Pull();
    await rx.bind('tcp://127.0.0.1:*');
    const port = Number(/:(\d+)$/.exec(rx.lastEndpoint!)![1]);
    const frames = rx.receive();
    frames.catch(() => undefined); // closed below if nothing came
    const sent = await ledger.nats('send to a real receiver', 5000, () =>
      natsCall(nc, t, 'send', {
        req_id: 'n1-real',
        prefill_host: '127.0.0.1',
        embedding_port: port,
        timeout_ms: 5000,
      }),
    );
    const acked = sent?.response?.acked === true;
    // What reached the receiver (an acked send whose frames never came is a silent loss).
    const got = acked
      ? await Promise.race([
          frames,
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000).unref()),
        ])
      : undefined;
    rx.close();
    const framesReceived = got?.[0]?.includes(Buffer.from('n1-real')) ? 1 : 0;
    expect(sent?.response).toMatchObject({ req_id: 'n1-real', acked: true });
    expect(framesReceived).toBe(1);
    expect(got![1]!.length).toBe(Number(sent!.response!.bytes));
    // Every flood send failed as a delivery failure (nobody there), none as a 500 from
    // libzmq; at most the sends in flight held a socket at any time.
    expect(ledger.summary().errorTypes).toEqual({ delivery_failed: FLOOD });
    expect(mostOpen).toBeLessThanOrEqual(AT_ONCE);
    // No file descriptors held for them either (before the fix: +1,064).
    expect(fds() - fdsBefore).toBeLessThan(AT_ONCE);
    const ids = ['n1-a', 'n1-b', 'n1-real'];
    for (const id of ids) await natsCall(nc, t, 'release', { req_id: id });
    recordFault('zmq-socket-flood', {
      fault: `sends to ${FLOOD} unreachable ZMQ ports (${AT_ONCE} at a time, 200 ms), then one to a new real receiver`,
      ledger,
      silentlyLost: acked ? 1 - framesReceived : 0,
      // Sockets still open beyond the real receiver's (kept for reuse), and request state.
      leftBehind: sender.openConnections - 1 + (await leftBehind(t.httpUrl, ids)),
    });
  }, 120_000);
});
