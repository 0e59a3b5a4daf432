import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-node';
import request from 'supertest';
import { EncoderClient } from '../src/client';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { startTracing, type TracingHandle } from '../src/tracing/tracing';
import { sharedNatsUrl, startTestApp, uniquePrefix, type TestApp } from './support/app';
import { startServiceProcess } from './support/service-process';
import { encodeBody, natsCall, waitFor } from './support/calls';
import { dataUri, image } from './support/media';

/** A caller's W3C trace context: a fresh trace id and the caller's span id. */
function caller(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

describe('OpenTelemetry tracing (e2e, in-memory exporter)', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: TracingHandle;
  let t: TestApp;
  let nc: NatsConnection;
  let item: string;

  const spansOf = (traceId: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  const one = (spans: ReadableSpan[], name: string): ReadableSpan => {
    const found = spans.filter((s) => s.name === name);
    expect(found.map((s) => s.name)).toEqual([name]);
    return found[0]!;
  };
  const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

  beforeAll(async () => {
    tracing = startTracing({ exporter })!;
    t = await startTestApp();
    nc = await connect({ servers: sharedNatsUrl() });
    item = dataUri(await image(112, 84, 'png'), 'image/png');
  });
  afterAll(async () => {
    await nc.close();
    await t.close();
    await tracing.shutdown();
  });

  it('continues a caller’s trace from NATS headers: one encode span, a child per stage', async () => {
    const c = caller();
    const r = await natsCall(nc, t, 'encode', encodeBody('tr-1', [item]), {
      headers: { traceparent: c.traceparent },
    });
    expect(r.response).toMatchObject({ req_id: 'tr-1' });
    const spans = spansOf(c.traceId);
    const encode = one(spans, 'encode');
    expect(parentOf(encode)).toBe(c.spanId);
    expect(encode.attributes).toMatchObject({
      'epd.req_id': 'tr-1',
      'epd.modality': 'image',
      'epd.items': 1,
      'epd.embedding_len': r.response!.embedding_len,
    });
    const id = encode.spanContext().spanId;
    for (const stage of ['load', 'plan', 'preprocess', 'forward', 'stage'])
      expect(parentOf(one(spans, stage))).toBe(id);
    expect(one(spans, 'forward').attributes['epd.batch_size']).toBe(1);
    // Children lie within their parent.
    for (const s of spans.filter((x) => parentOf(x) === id)) {
      expect(s.startTime[0] * 1e9 + s.startTime[1]).toBeGreaterThanOrEqual(
        encode.startTime[0] * 1e9 + encode.startTime[1],
      );
    }
  });

  it('traces wait_metadata with its outcome, an ok one and a 504', async () => {
    const ok = caller();
    await natsCall(
      nc,
      t,
      'wait_metadata',
      { req_id: 'tr-1' },
      { headers: { traceparent: ok.traceparent } },
    );
    const waitOk = one(spansOf(ok.traceId), 'wait_metadata');
    expect(parentOf(waitOk)).toBe(ok.spanId);
    expect(waitOk.attributes).toMatchObject({ 'epd.req_id': 'tr-1', 'epd.outcome': 'ok' });

    const late = caller();
    const r = await natsCall(
      nc,
      t,
      'wait_metadata',
      { req_id: 'tr-never', timeout_ms: 100 },
      { headers: { traceparent: late.traceparent } },
    );
    expect(r.err?.code).toBe(504);
    // The span ends as the 504 is answered: wait until it is exported.
    await waitFor(() => spansOf(late.traceId).length > 0);
    const waitLate = one(spansOf(late.traceId), 'wait_metadata');
    expect(waitLate.attributes['epd.outcome']).toBe('timeout');
    expect(waitLate.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('traces a send to its receiver’s ack', async () => {
    const rx = await ReferenceReceiver.start({ onFrame: () => undefined });
    try {
      const c = caller();
      const r = await natsCall(
        nc,
        t,
        'send',
        { req_id: 'tr-1', prefill_host: '127.0.0.1', embedding_port: rx.port },
        { headers: { traceparent: c.traceparent } },
      );
      expect(r.response).toMatchObject({ acked: true });
      const send = one(spansOf(c.traceId), 'send');
      expect(parentOf(send)).toBe(c.spanId);
      expect(send.attributes).toMatchObject({
        'epd.endpoint': `127.0.0.1:${rx.port}`,
        'epd.bytes': r.response!.bytes,
        'epd.backend': 'tcp',
      });
    } finally {
      await rx.close();
    }
  });

  it('continues a trace from an HTTP traceparent header', async () => {
    const c = caller();
    const res = await request(t.httpUrl)
      .post('/encode')
      .set('traceparent', c.traceparent)
      .send(encodeBody('tr-http', [item]));
    expect(res.status).toBe(200);
    expect(parentOf(one(spansOf(c.traceId), 'encode'))).toBe(c.spanId);
  });

  it('the SDK puts the caller’s active span on its NATS requests', async () => {
    const client = await EncoderClient.connect({
      servers: sharedNatsUrl(),
      subjectPrefix: t.config.nats.subjectPrefix,
    });
    try {
      const tracer = trace.getTracer('prefill-server');
      const { traceId, spanId } = await tracer.startActiveSpan('prefill', async (span) => {
        await client.encode({ ...encodeBody('tr-sdk', []), modality: 'image', mm_items: [item] });
        span.end();
        return span.spanContext();
      });
      expect(parentOf(one(spansOf(traceId), 'encode'))).toBe(spanId);
    } finally {
      await client.close();
    }
  });

  it('starts no span without a caller’s context beyond its own root', async () => {
    exporter.reset();
    await natsCall(nc, t, 'encode', encodeBody('tr-root', [item]));
    const encode = exporter.getFinishedSpans().find((s) => s.name === 'encode');
    expect(encode).toBeDefined();
    expect(parentOf(encode!)).toBeUndefined();
  });
});

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
}
interface OtlpBody {
  resourceSpans: {
    resource: { attributes: { key: string; value: Record<string, unknown> }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

/** A minimal OTLP/HTTP (JSON) collector: what the service's real exporter sends. */
async function collector(): Promise<{
  url: string;
  spans: (OtlpSpan & { rank?: unknown })[];
  close(): Promise<void>;
}> {
  const spans: (OtlpSpan & { rank?: unknown })[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as OtlpBody;
        for (const rs of body.resourceSpans) {
          const rank = rs.resource.attributes.find((a) => a.key === 'epd.dp_rank')?.value;
          for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, rank });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('OpenTelemetry tracing over OTLP from a DP service (e2e)', () => {
  it('exports to OTEL_EXPORTER_OTLP_ENDPOINT, and a worker’s encode span continues the caller’s trace through its supervisor', async () => {
    const otlp = await collector();
    const prefix = uniquePrefix();
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_DP_SIZE: '2',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'epd-encoder-test',
    });
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      const item = dataUri(await image(112, 84, 'png'), 'image/png');
      const c = caller();
      const h = natsHeaders();
      h.set('traceparent', c.traceparent);
      const reply = (
        await nc.request(`${prefix}.v1.encode`, JSON.stringify(encodeBody('otlp-1', [item])), {
          timeout: 30_000,
          headers: h,
        })
      ).json<{ response?: unknown }>();
      expect(reply.response).toMatchObject({ req_id: 'otlp-1' });
      const ofTrace = () => otlp.spans.filter((s) => s.traceId === c.traceId);
      expect(await waitFor(() => ofTrace().some((s) => s.name === 'encode'), 10_000)).toBe(true);
      const encode = ofTrace().find((s) => s.name === 'encode')!;
      expect(encode.parentSpanId).toBe(c.spanId);
      // Encoded by a worker process (its resource names its rank), not by the supervisor.
      expect(encode.rank).toBeDefined();
      expect(await waitFor(() => ofTrace().some((s) => s.name === 'forward'), 10_000)).toBe(true);
      expect(ofTrace().find((s) => s.name === 'forward')!.parentSpanId).toBe(encode.spanId);
    } finally {
      await nc.close();
      await svc.stop();
      await otlp.close();
    }
  });
});
