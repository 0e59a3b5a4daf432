import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { METRICS, type MetricSpec } from '../src/metrics/catalogue';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall, waitFor, type Reply } from './support/calls';
import { dataUri, image } from './support/media';

/** One series' value from Prometheus text, e.g. `epd_encoder_sends_total{outcome="acked"}`. */
function value(text: string, series: string): number | undefined {
  const escaped = series.replace(/[{}()[\].*+?^$|\\]/g, '\\$&');
  const m = new RegExp(`^${escaped}(?:\\{[^}]*dp_rank="\\d+"[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** The values of `series` in Prometheus text, to compare with the expected ones at once. */
function values(
  text: string,
  expected: Record<string, number>,
): Record<string, number | undefined> {
  return Object.fromEntries(Object.keys(expected).map((series) => [series, value(text, series)]));
}

/** Families of ours in Prometheus text: name → type. */
function families(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (epd_\w+) (\w+)$/gm)) out.set(m[1]!, m[2]!);
  return out;
}

describe('Prometheus /metrics (e2e)', () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(() => nc.close());

  it('exports every catalogued family with its type, and nothing outside the catalogue', async () => {
    const t = await startTestApp({ EPD_CACHE_MAX_BYTES: '1048576' });
    try {
      const text = (await request(t.httpUrl).get('/metrics')).text;
      const expected = new Map(
        Object.entries(METRICS as Record<string, MetricSpec>)
          .filter(([, m]) => !m.only?.startsWith('DP supervisor'))
          .map(([name, m]) => [name, m.type]),
      );
      expect(Object.fromEntries(families(text))).toEqual(Object.fromEntries(expected));
      // No series names a request.
      expect(text).not.toMatch(/req_id=/);
    } finally {
      await t.close();
    }
  });

  describe('after a known sequence of calls', () => {
    let t: TestApp;
    let rx: ReferenceReceiver;
    let text: string;
    let tokens: number[];
    let bytes: number;
    const call = (dp: string, data: unknown): Promise<Reply> =>
      natsCall(nc, t, dp, data, { timeout: 60_000 });

    beforeAll(async () => {
      t = await startTestApp({ EPD_SEND_TIMEOUT_MS: '60000' });
      rx = await ReferenceReceiver.start({ onFrame: () => undefined });
      const item = dataUri(await image(112, 84, 'png'), 'image/png');
      const meta = { embedding_size: 8, embedding_len: 2, embedding_dim: 1 };

      // 3 waits answered, 2 that reach their deadline.
      for (const id of ['w1', 'w2', 'w3'])
        await call('publish_metadata', { req_id: id, metadata: meta });
      const waits = await Promise.all([
        ...['w1', 'w2', 'w3'].map((id) => call('wait_metadata', { req_id: id })),
        call('wait_metadata', { req_id: 'never-1', timeout_ms: 200 }),
        call('wait_metadata', { req_id: 'never-2', timeout_ms: 200 }),
      ]);
      expect(waits.map((w) => w.err?.code ?? 200)).toEqual([200, 200, 200, 504, 504]);

      // Encoded and sent to its one receiver (released on the ack); encoded and released;
      // released before its encode (a 409 at begin).
      const e1 = await call('encode', encodeBody('e1', [item]));
      const sent = await call('send', {
        req_id: 'e1',
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
        receive_count: 1,
      });
      expect(sent.response).toMatchObject({ acked: true });
      const e2 = await call('encode', encodeBody('e2', [item, item]));
      expect((await call('release', { req_id: 'e2' })).err).toBeUndefined();
      expect((await call('release', { req_id: 'e3' })).err).toBeUndefined();
      expect((await call('encode', encodeBody('e3', [item]))).err).toMatchObject({
        code: 409,
        type: 'released',
      });
      tokens = [e1, e2].map((r) => r.response!.embedding_len as number);
      bytes = e1.response!.embedding_size as number;
      // The release on ack runs after the send's reply.
      await waitFor(
        async () => (await request(t.httpUrl).get('/admin/requests')).body.staging.states === 0,
      );
      text = (await request(t.httpUrl).get('/metrics')).text;
    });
    afterAll(async () => {
      await t.close();
      await rx.close();
    });

    it('counts wait_metadata outcomes and times them: 3 ok, 2 timeouts', () => {
      const expected = {
        'epd_encoder_wait_metadata_total{outcome="ok"}': 3,
        'epd_encoder_wait_metadata_total{outcome="timeout"}': 2,
        'epd_encoder_wait_metadata_total{outcome="error"}': 0,
        'epd_encoder_wait_metadata_total{outcome="cancelled"}': 0,
        'epd_encoder_wait_metadata_seconds_count{outcome="ok"}': 3,
        'epd_encoder_wait_metadata_seconds_count{outcome="timeout"}': 2,
      };
      expect(values(text, expected)).toEqual(expected);
      // Each timeout took about its 200 ms; no ok wait took that long. The deadline counts
      // from the call's arrival and the histogram from the wait's start, a few ms later
      // on a busy machine (CI saw 2 × 195 ms), so the bound leaves 20 ms for that.
      expect(
        value(text, 'epd_encoder_wait_metadata_seconds_sum{outcome="timeout"}'),
      ).toBeGreaterThanOrEqual(2 * 0.18);
      expect(
        value(text, 'epd_encoder_wait_metadata_seconds_bucket{le="0.1",outcome="timeout"}'),
      ).toBe(0);
      const registry = {
        'epd_encoder_registry_events_total{event="timeout"}': 2,
        'epd_encoder_registry_events_total{event="wait"}': 5,
        epd_encoder_registry_waiters: 0,
      };
      expect(values(text, registry)).toEqual(registry);
    });

    it('counts encodes by outcome and error type, and the 409 as a rejection', () => {
      expect(value(text, 'epd_encoder_requests_received_total{modality="image"}')).toBe(3);
      expect(
        value(text, 'epd_encoder_requests_total{modality="image",status="success",type="none"}'),
      ).toBe(2);
      expect(
        value(
          text,
          'epd_encoder_requests_total{modality="image",status="rejected",type="released"}',
        ),
      ).toBe(1);
      expect(value(text, 'epd_encoder_rejections_total{code="409",type="released"}')).toBe(1);
      expect(value(text, 'epd_encoder_pending_requests')).toBe(0);
    });

    it('observes the stages, items and tokens of the two successful encodes', () => {
      for (const stage of [
        'load',
        'preprocess',
        'queue_wait',
        'forward',
        'stage',
        'request_e2e_latency',
      ])
        expect(value(text, `epd_encoder_${stage}_seconds_count{modality="image"}`)).toBe(2);
      expect(value(text, 'epd_encoder_mm_items_per_request_count{modality="image"}')).toBe(2);
      expect(value(text, 'epd_encoder_mm_items_per_request_sum{modality="image"}')).toBe(3);
      expect(value(text, 'epd_encoder_tokens_per_request_sum{modality="image"}')).toBe(
        tokens[0]! + tokens[1]!,
      );
      expect(value(text, 'epd_encoder_requests_per_batch_count')).toBe(2);
      expect(value(text, 'epd_encoder_mm_items_per_batch_sum')).toBe(3);
    });

    it('counts the delivery, its bytes and its ack, and each release by reason', () => {
      const expected = {
        'epd_encoder_sends_total{outcome="acked"}': 1,
        'epd_encoder_sends_total{outcome="failed"}': 0,
        epd_encoder_sent_bytes_total: bytes,
        'epd_encoder_send_seconds_count{backend="tcp"}': 1,
        epd_encoder_transfer_connections: 1,
        'epd_encoder_releases_total{reason="ack"}': 1,
        'epd_encoder_releases_total{reason="explicit"}': 1,
        'epd_encoder_releases_total{reason="ttl"}': 0,
        'epd_encoder_releases_total{reason="error"}': 0,
        epd_encoder_staged_bytes: 0,
        epd_encoder_staged_oldest_age_seconds: 0,
        epd_encoder_active_requests: 0,
      };
      expect(values(text, expected)).toEqual(expected);
    });
  });
});
