import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './config.loader';

describe('loadConfig', () => {
  it('embeds the documented defaults (docs/configuration.md)', () => {
    const { config } = loadConfig({});
    expect(config.nats.url).toEqual(['nats://127.0.0.1:4222']);
    expect(config.nats.subjectPrefix).toBe('epd');
    expect(config.http).toEqual({
      host: '127.0.0.1',
      port: 30000,
      maxBodyBytes: 67108864,
      bodyTimeoutMs: 60000,
    });
    expect(config.timeouts).toEqual({ reqTimeoutMs: 180000, sendTimeoutMs: 180000 });
    expect(config.encoder).toMatchObject({
      maxBatchSize: 8,
      maxPending: 64,
      stagingMaxBytes: 1073741824,
      dpSize: 1,
    });
    expect(config.registry.store).toBe('memory');
    expect(config.media).toMatchObject({
      allowedDomains: [],
      maxBytes: 20971520,
      root: '',
      allowPrivateNetworks: false,
    });
    expect(config.admin.token).toBeUndefined();
  });

  it('lets EPD_* variables override, splitting comma lists', () => {
    const { config } = loadConfig({
      EPD_NATS_URL: 'nats://127.0.0.1:1, nats://127.0.0.1:2',
      EPD_HTTP_PORT: '8080',
      EPD_ADMIN_TOKEN: 's3cret-0123456789abcdef0123456789abcdef',
      EPD_ALLOWED_MEDIA_DOMAINS: 'example.com,cdn.example.com',
    });
    expect(config.nats.url).toEqual(['nats://127.0.0.1:1', 'nats://127.0.0.1:2']);
    expect(config.http.port).toBe(8080);
    expect(config.admin.token).toBe('s3cret-0123456789abcdef0123456789abcdef');
    expect(config.media.allowedDomains).toEqual(['example.com', 'cdn.example.com']);
  });

  it('stops with a message that names the key, the variable and the reason', () => {
    expect(() => loadConfig({ EPD_HTTP_PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ EPD_HTTP_PORT: 'eighty' })).toThrow(
      /http\.port \(EPD_HTTP_PORT\): .*number/,
    );
    expect(() => loadConfig({ EPD_REGISTRY_STORE: 'redis' })).toThrow(
      /registry\.store \(EPD_REGISTRY_STORE\)/,
    );
    expect(() => loadConfig({ EPD_NATS_URL: 'http://x' })).toThrow(/nats\.url.*nats:\/\/ URL/);
    expect(() => loadConfig({ EPD_REQ_TIMEOUT_MS: '-5' })).toThrow(/timeouts\.reqTimeoutMs/);
    expect(() => loadConfig({ EPD_SUBJECT_PREFIX: 'a.b' })).toThrow(/nats\.subjectPrefix/);
    expect(() => loadConfig({ EPD_NATS_INBOX_PREFIX: '_INBOX.>' })).toThrow(/nats\.inboxPrefix/);
    // N7 (security, second pass): a short admin token is refused, naming the rule.
    expect(() => loadConfig({ EPD_ADMIN_TOKEN: 'sesame' })).toThrow(
      /admin\.token \(EPD_ADMIN_TOKEN\): must be at least 32 characters/,
    );
    expect(() => loadConfig({ EPD_DP_SIZE: '0' })).toThrow(/encoder\.dpSize \(EPD_DP_SIZE\)/);
    expect(() => loadConfig({ EPD_DP_SIZE: '65' })).toThrow(/encoder\.dpSize \(EPD_DP_SIZE\)/);
    expect(() => loadConfig({ EPD_HEAP_GROWING_PERCENT: '-1' })).toThrow(
      /encoder\.heapGrowingPercent \(EPD_HEAP_GROWING_PERCENT\)/,
    );
  });

  it("refuses vLLM's face where it cannot work: without a model id, beside DP, a proxy without a path", () => {
    expect(() => loadConfig({ EPD_VLLM_EC_PATH: '/tmp/ec' })).toThrow(
      /EPD_VLLM_MODEL_ID must be set/,
    );
    expect(() =>
      loadConfig({ EPD_VLLM_EC_PATH: '/tmp/ec', EPD_VLLM_MODEL_ID: 'm', EPD_DP_SIZE: '2' }),
    ).toThrow(/vllm\.ecPath.*EPD_DP_SIZE=1/);
    expect(() => loadConfig({ EPD_VLLM_PROXY_URL: 'http://proxy:1' })).toThrow(
      /EPD_VLLM_PROXY_URL needs EPD_VLLM_EC_PATH/,
    );
    expect(() => loadConfig({ EPD_VLLM_EC_PATH: 'relative/ec', EPD_VLLM_MODEL_ID: 'm' })).toThrow(
      /absolute path/,
    );
    expect(
      loadConfig({ EPD_VLLM_EC_PATH: '/tmp/ec', EPD_VLLM_MODEL_ID: 'm' }).config.vllm,
    ).toMatchObject({
      ecPath: '/tmp/ec',
      hashAlgorithm: 'blake3',
      ecTtlS: 600,
    });
  });

  it("gives V8 heaps 200% room to grow by default; 0 keeps V8's heuristic", () => {
    expect(loadConfig({}).config.encoder.heapGrowingPercent).toBe(200);
    expect(loadConfig({ EPD_HEAP_GROWING_PERCENT: '0' }).config.encoder.heapGrowingPercent).toBe(0);
  });

  it('layers default.yaml < <NODE_ENV>.yaml < EPD_CONFIG < env', () => {
    const dir = mkdtempSync(join(tmpdir(), 'epd-config-'));
    const extra = join(dir, 'extra.yaml');
    writeFileSync(extra, 'http:\n  port: 4000\nlog:\n  level: debug\n');
    const { config, files } = loadConfig({
      NODE_ENV: 'test',
      EPD_CONFIG: extra,
      EPD_LOG_LEVEL: 'error',
    });
    expect(files.map((f) => f.split('/').pop())).toEqual([
      'default.yaml',
      'test.yaml',
      'extra.yaml',
    ]);
    expect(config.http.port).toBe(4000);
    expect(config.log.level).toBe('error');
    expect(config.registry.sweepIntervalMs).toBe(100); // from test.yaml
  });

  it('names a bad YAML file and a missing EPD_CONFIG', () => {
    const dir = mkdtempSync(join(tmpdir(), 'epd-config-'));
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'http: [unclosed');
    expect(() => loadConfig({ EPD_CONFIG: bad })).toThrow(/cannot read config file .*bad\.yaml/);
    expect(() => loadConfig({ EPD_CONFIG: join(dir, 'missing.yaml') })).toThrow(
      /EPD_CONFIG: no such file/,
    );
  });

  it("does not call a Kubernetes Service's injected variables typos (a Service named epd-encoder)", () => {
    // What the kubelet injects for a Service named epd-encoder with one port, 30000/TCP.
    const links = {
      EPD_ENCODER_SERVICE_HOST: '10.96.0.12',
      EPD_ENCODER_SERVICE_PORT: '30000',
      EPD_ENCODER_SERVICE_PORT_HTTP: '30000',
      EPD_ENCODER_PORT: 'tcp://10.96.0.12:30000',
      EPD_ENCODER_PORT_30000_TCP: 'tcp://10.96.0.12:30000',
      EPD_ENCODER_PORT_30000_TCP_PROTO: 'tcp',
      EPD_ENCODER_PORT_30000_TCP_PORT: '30000',
      EPD_ENCODER_PORT_30000_TCP_ADDR: '10.96.0.12',
    };
    const { unknownEnv } = loadConfig({ ...links, EPD_CONFIG: undefined });
    expect(unknownEnv).toEqual([]);
    // A typo that only looks like a port is still reported.
    expect(loadConfig({ EPD_HTP_PORT: '8080', EPD_CONFIG: undefined }).unknownEnv).toEqual([
      'EPD_HTP_PORT',
    ]);
  });

  it('reports unknown EPD_* variables instead of ignoring typos silently', () => {
    const { unknownEnv } = loadConfig({ EPD_NATS_UR: 'x', EPD_CONFIG: undefined });
    expect(unknownEnv).toEqual(['EPD_NATS_UR']);
  });
});
