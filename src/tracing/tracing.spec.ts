import { tracingConfigured } from './tracing';

describe('tracingConfigured (the standard OTEL_* variables)', () => {
  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true],
    [{ OTEL_TRACES_EXPORTER: 'otlp' }, true],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, false],
    [{ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, false],
  ])('%j → %s', (env, on) => {
    expect(tracingConfigured(env as NodeJS.ProcessEnv)).toBe(on);
  });
});
