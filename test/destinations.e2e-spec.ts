import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall } from './support/calls';
import { dataUri, image } from './support/media';

/**
 * EPD_ALLOWED_DESTINATIONS (found by the outside review: any NATS or HTTP caller could make
 * the encoder connect to any host and port, e.g. internal services, with `send`).
 */
describe('EPD_ALLOWED_DESTINATIONS (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  let png: string;
  const frames: string[] = [];

  beforeAll(async () => {
    // Loopback is not in the list, so the receiver on 127.0.0.1 is refused; "localhost" is
    // listed by name, and reaches the same receiver.
    t = await startTestApp({ EPD_ALLOWED_DESTINATIONS: '10.0.0.0/8,localhost' });
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header }) => void frames.push(header.req_id),
    });
    png = dataUri(await image(64, 64, 'png'), 'image/png');
  });

  afterAll(async () => {
    await rx.close();
    await nc.close();
    await t.close();
  });

  const batches = async () =>
    ((await request(t.httpUrl).get('/admin/encoder')).body as { batches: number }).batches;

  it('refuses send to an endpoint outside the list with a 403 that names it, and pushes nothing', async () => {
    expect((await natsCall(nc, t, 'encode', encodeBody('d-1', [png]))).err).toBeUndefined();
    const r = await natsCall(nc, t, 'send', {
      req_id: 'd-1',
      prefill_host: '127.0.0.1',
      embedding_port: rx.port,
    });
    expect(r.err).toMatchObject({
      code: 403,
      type: 'destination_not_allowed',
      req_id: 'd-1',
      message: `destination 127.0.0.1:${rx.port} is not allowed by EPD_ALLOWED_DESTINATIONS (the address is in no listed range)`,
    });
    expect(frames).not.toContain('d-1');
    // A listed name goes through.
    const ok = await natsCall(nc, t, 'send', {
      req_id: 'd-1',
      prefill_host: 'localhost',
      embedding_port: rx.port,
    });
    expect(ok.err).toBeUndefined();
    expect(frames).toContain('d-1');
  });

  it('refuses an encode that names a refused prefill_host before any work, over HTTP too', async () => {
    const before = await batches();
    const r = await request(t.httpUrl)
      .post('/encode')
      .send({ ...encodeBody('d-2', [png]), prefill_host: '127.0.0.1', embedding_port: rx.port });
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ type: 'destination_not_allowed', req_id: 'd-2' });
    expect(await batches()).toBe(before);
    expect(frames).not.toContain('d-2');
  });

  it('refuses register_destinations to a refused receive_url', async () => {
    const r = await natsCall(nc, t, 'register_destinations', {
      req_id: 'd-3',
      receive_count: 1,
      receive_url: `127.0.0.1:${rx.port}`,
    });
    expect(r.err).toMatchObject({ code: 403, type: 'destination_not_allowed' });
  });
});
