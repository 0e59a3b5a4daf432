import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-node';

/**
 * OpenTelemetry tracing, off unless configured by the standard variables: on when
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or
 * OTEL_TRACES_EXPORTER=otlp), off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 * The OTLP/HTTP exporter reads its own OTEL_EXPORTER_OTLP_* settings (headers, timeout).
 *
 * Off, nothing here costs more than a boolean check: no context is extracted, and no span
 * is started. On, W3C `traceparent` from HTTP and NATS headers parents the spans, so a
 * prefill server's trace continues into the encoder.
 */

const TRACER = 'epd-encoder';
let enabled = false;
let registered: NodeTracerProvider | undefined;

export interface TracingHandle {
  shutdown(): Promise<void>;
}

/** Whether the standard variables ask for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === 'none') return false;
  return (
    exporter === 'otlp' ||
    !!env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    !!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  );
}

/**
 * Registers the global tracer provider (once per process) with the W3C trace-context
 * propagator and AsyncLocalStorage context. `exporter` (tests) replaces OTLP and exports
 * each span as it ends. Returns undefined when tracing is not configured.
 */
export function startTracing(
  options: { exporter?: SpanExporter; env?: NodeJS.ProcessEnv; attributes?: Attributes } = {},
): TracingHandle | undefined {
  const env = options.env ?? process.env;
  if (!options.exporter && !tracingConfigured(env)) return undefined;
  const resource = detectResources({ detectors: [envDetector] }).merge(
    resourceFromAttributes({
      'service.name': env.OTEL_SERVICE_NAME ?? 'epd-encoder',
      ...options.attributes,
    }),
  );
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [
      options.exporter
        ? new SimpleSpanProcessor(options.exporter)
        : new BatchSpanProcessor(new OTLPTraceExporter()),
    ],
  });
  provider.register();
  enabled = true;
  registered = provider;
  return {
    async shutdown() {
      enabled = false;
      registered = undefined;
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** Exports the spans still batched (the app calls it as it shuts down). */
export async function flushTracing(): Promise<void> {
  await registered?.forceFlush().catch(() => undefined);
}

export function tracingEnabled(): boolean {
  return enabled;
}

/** Reads W3C headers from NATS message headers (nats.js MsgHdrs) or a plain record. */
interface HeaderSource {
  get(key: string): string;
  keys(): string[];
}
const natsGetter: TextMapGetter<HeaderSource> = {
  get: (carrier, key) => carrier.get(key) || undefined,
  keys: (carrier) => carrier.keys(),
};
const natsSetter: TextMapSetter<{ set(k: string, v: string): void }> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

/** The trace context a NATS message carries, if tracing is on and it carries one. */
export function contextFromNats(headers: HeaderSource | undefined): Context | undefined {
  if (!enabled || !headers) return undefined;
  const ctx = propagation.extract(ROOT_CONTEXT, headers, natsGetter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** The trace context of HTTP request headers (a `traceparent`), if tracing is on. */
export function contextFromHttp(headers: Record<string, unknown>): Context | undefined {
  if (!enabled || typeof headers.traceparent !== 'string') return undefined;
  return propagation.extract(ROOT_CONTEXT, headers);
}

/** Puts the active trace context on outgoing NATS headers (forwarded calls). */
export function injectNats(headers: { set(k: string, v: string): void }): void {
  if (enabled) propagation.inject(context.active(), headers, natsSetter);
}

/** The active span's W3C `traceparent`, for a hop that is not NATS (the DP supervisor's IPC). */
export function currentTraceparent(): string | undefined {
  if (!enabled) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** Runs `fn` within `ctx` (when there is one). */
export function withContext<T>(ctx: Context | undefined, fn: () => T): T {
  return ctx ? context.with(ctx, fn) : fn();
}

/** Records an error on a span: its status, and the error type and code as attributes. */
export function failSpan(span: Span, err: unknown): void {
  const e = err as { message?: string; code?: unknown; type?: unknown };
  span.setStatus({ code: SpanStatusCode.ERROR, message: e.message ?? String(err) });
  if (typeof e.type === 'string') span.setAttribute('epd.error.type', e.type);
  if (typeof e.code === 'number') span.setAttribute('epd.error.code', e.code);
}

/**
 * Runs `fn` in a child span of the active context named `name`, ended when `fn` settles
 * (its error recorded). Off, `fn` runs alone and gets no span.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
  kind: SpanKind = SpanKind.INTERNAL,
): Promise<T> {
  if (!enabled) return fn(undefined);
  return trace.getTracer(TRACER).startActiveSpan(name, { attributes, kind }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** A span the caller ends (for work that ends in a callback, such as an Observable). */
export function startSpan(
  name: string,
  attributes: Attributes,
  kind: SpanKind = SpanKind.INTERNAL,
): Span | undefined {
  if (!enabled) return undefined;
  return trace.getTracer(TRACER).startSpan(name, { attributes, kind });
}

export { SpanKind };
