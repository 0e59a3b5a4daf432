import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { drained } from './support/drained';

/**
 * Fuzzing every NATS subject and the HTTP routes with random and mutated-valid bodies
 * (wrong types, huge strings, deep nesting, unicode and NUL, `__proto__` keys, NaN and
 * huge numbers, invalid JSON, oversize payloads). Every input gets a 4xx that names the
 * problem, or a valid answer, or a 5xx of a documented type; never an undocumented 5xx,
 * a hang or a crash. Valid traffic keeps being served in between, and nothing is left in
 * the registry or the request state afterwards. EPD_FUZZ_RUNS inputs (CI: 300;
 * `npm run test:reliability`: 10,000); the seed is printed and EPD_FUZZ_SEED replays it.
 */
const RUNS = Number(process.env.EPD_FUZZ_RUNS ?? 300);
const SEED = Number(process.env.EPD_FUZZ_SEED ?? Date.now() % 2 ** 31);
const OUT = process.env.EPD_RELIABILITY_OUT;
const MAX_REQUEST_BYTES = 65_536;
const TTL_MS = 3000;

/** Every error type docs/errors.md documents, with its code(s). */
function documentedTypes(): Map<string, string> {
  const table = readFileSync(join(__dirname, '..', 'docs', 'errors.md'), 'utf8');
  const types = new Map<string, string>();
  for (const m of table.matchAll(/^\| `([a-z_]+)`(?: \/ `([a-z_]+)`)?\s*\| ([\d /]+)\|/gm)) {
    types.set(m[1]!, m[3]!.trim());
    if (m[2]) types.set(m[2], m[3]!.trim());
  }
  return types;
}

type Target =
  { via: 'nats'; dp: string } | { via: 'http'; method: 'POST' | 'GET' | 'DELETE'; path: string };

interface Outcome {
  ok: boolean;
  kind: 'ok' | '4xx' | 'documented-5xx' | 'undocumented-5xx' | 'hang' | 'bad-reply';
  detail?: string;
}

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe(`fuzzing NATS subjects and HTTP routes (e2e, ${RUNS} inputs, seed ${SEED})`, () => {
  let t: TestApp;
  let nc: NatsConnection;
  let png: string;
  const types = documentedTypes();
  const counts = new Map<string, number>();
  const failures: { target: string; body: string; outcome: Outcome }[] = [];
  const valid = { ok: 0, failed: 0 };

  beforeAll(async () => {
    t = await startTestApp({
      EPD_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
      EPD_HTTP_MAX_BODY_BYTES: String(4 * MAX_REQUEST_BYTES),
      EPD_REQ_TIMEOUT_MS: '500',
      EPD_SEND_TIMEOUT_MS: String(TTL_MS),
      EPD_PROFILE_ROOT: mkdtempSync(join(tmpdir(), 'epd-fuzz-prof-')),
      EPD_ADMIN_TOKEN: '',
    });
    nc = await connect({ servers: sharedNatsUrl() });
    png = dataUri(await image(32, 32, 'png'), 'image/png');
  });

  afterAll(async () => {
    await nc.close();
    await t.close();
  });

  /** A valid body per target, to mutate. */
  const validBody = (target: Target, id: string): Record<string, unknown> => {
    const name = target.via === 'nats' ? target.dp : target.path;
    if (/encode/.test(name)) return encodeBody(id, [png]);
    if (/publish_metadata|admin\/registry/.test(name))
      return {
        req_id: id,
        metadata: { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 },
      };
    if (/wait_metadata|scheduler_receive_meta_data/.test(name))
      return { req_id: id, timeout_ms: 50 };
    if (/register_destinations|scheduler_receive_url/.test(name))
      return { req_id: id, receive_count: 1, receive_url: '127.0.0.1:9' };
    if (/send_status/.test(name)) return { req_id: id };
    if (/send/.test(name))
      return { req_id: id, prefill_host: '127.0.0.1', embedding_port: 9, timeout_ms: 200 };
    if (/profile/.test(name)) return { num_steps: 1 };
    return { req_id: id };
  };

  const targets: Target[] = [
    ...[
      'encode',
      'publish_metadata',
      'wait_metadata',
      'has_metadata',
      'register_destinations',
      'send',
      'send_status',
      'release',
      'health_encode',
      'start_profile',
      'stop_profile',
    ].map((dp) => ({ via: 'nats' as const, dp })),
    { via: 'http', method: 'POST', path: '/encode' },
    { via: 'http', method: 'POST', path: '/send' },
    { via: 'http', method: 'POST', path: '/scheduler_receive_meta_data' },
    { via: 'http', method: 'POST', path: '/scheduler_receive_url' },
    { via: 'http', method: 'POST', path: '/start_profile' },
    { via: 'http', method: 'POST', path: '/admin/registry/{id}' },
    { via: 'http', method: 'GET', path: '/admin/registry/{id}' },
    { via: 'http', method: 'DELETE', path: '/admin/registry/{id}' },
    { via: 'http', method: 'POST', path: '/admin/requests/{id}/release' },
  ];

  const weird: fc.Arbitrary<string> = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
    fc.string({ unit: 'binary', maxLength: 40 }).map((s) => JSON.stringify(s)),
    fc.constantFrom(
      '"\\u0000"',
      '"\\ud800"',
      '""',
      '"   "',
      '"💥 ünïcode ﷽"',
      `"${'x'.repeat(100_000)}"`,
      `"${'y'.repeat(2000)}"`,
      'NaN',
      'Infinity',
      '-0',
      '1e308',
      '1e400',
      '9007199254740993',
      '-1',
      '0',
      '3.5',
      'true',
      'null',
      '[]',
      '{}',
      nested(64),
      nested(5000),
      '{"__proto__":{"polluted":true}}',
      '{"constructor":{"prototype":{"polluted":true}}}',
      '["a",1,null,{}]',
    ),
  );

  const input = fc.record({
    target: fc.constantFrom(...targets),
    mutation: fc.oneof(
      // A valid body with one field replaced, added or removed.
      fc.record({
        kind: fc.constant('field' as const),
        field: fc.constantFrom(
          'req_id',
          'modality',
          'mm_items',
          'num_parts',
          'part_idx',
          'metadata',
          'timeout_ms',
          'receive_count',
          'receive_url',
          'prefill_host',
          'embedding_port',
          'hashes',
          'output_dir',
          'num_steps',
          '__proto__',
          'constructor',
          'extra',
        ),
        value: fc.oneof(weird, fc.constant(undefined)),
      }),
      // A whole random body.
      fc.record({ kind: fc.constant('whole' as const), value: weird }),
      // The valid body's text, broken.
      fc.record({
        kind: fc.constant('text' as const),
        how: fc.constantFrom('truncate', 'oversize', 'garbage', 'empty'),
        at: fc.nat(),
      }),
    ),
    id: fc.oneof(
      fc.constantFrom('fz-a', 'fz-b'),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
      fc.constantFrom('..', '../etc/passwd', '%2e%2e', 'a'.repeat(600), ' ', 'a b', '*', '>'),
    ),
  });

  type Mutation =
    | { kind: 'field'; field: string; value: string | undefined }
    | { kind: 'whole'; value: string }
    | { kind: 'text'; how: 'truncate' | 'oversize' | 'garbage' | 'empty'; at: number };

  const bodyText = (target: Target, m: Mutation, id: string): string => {
    const base = validBody(target, id);
    if (m.kind === 'whole') return m.value;
    if (m.kind === 'text') {
      const text = JSON.stringify(base);
      if (m.how === 'truncate') return text.slice(0, m.at % text.length);
      if (m.how === 'oversize')
        return JSON.stringify({ ...base, pad: 'z'.repeat(5 * MAX_REQUEST_BYTES) });
      if (m.how === 'garbage') return `${text.slice(0, m.at % text.length)}\u0000\u00ff{{`;
      return '';
    }
    const entries = Object.entries(base).filter(([k]) => k !== m.field);
    const parts = entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
    if (m.value !== undefined) parts.push(`${JSON.stringify(m.field)}:${m.value}`);
    return `{${parts.join(',')}}`;
  };

  const judge = (code: number, body: unknown): Outcome => {
    if (code < 400) return { ok: true, kind: 'ok' };
    const err = body as { type?: string; message?: string } | undefined;
    if (!err || typeof err.message !== 'string' || err.message.length === 0) {
      return { ok: false, kind: 'bad-reply', detail: `code ${code} without a message` };
    }
    if (code < 500) return { ok: true, kind: '4xx' };
    const documented = err.type !== undefined && types.has(err.type) && err.type !== 'internal';
    return documented
      ? { ok: true, kind: 'documented-5xx' }
      : { ok: false, kind: 'undocumented-5xx', detail: `${code} ${err.type}: ${err.message}` };
  };

  const viaNats = async (dp: string, text: string): Promise<Outcome> => {
    try {
      const msg = await nc.request(`${t.config.nats.subjectPrefix}.v1.${dp}`, text, {
        timeout: 10_000,
      });
      const reply = msg.json<{ response?: unknown; err?: { code: number } }>();
      return reply.err ? judge(reply.err.code, reply.err) : { ok: true, kind: 'ok' };
    } catch (err) {
      return { ok: false, kind: 'hang', detail: (err as Error).message };
    }
  };

  const viaHttp = async (target: Extract<Target, { via: 'http' }>, text: string, id: string) => {
    const path = target.path.replace('{id}', encodeURIComponent(id));
    try {
      const res = await fetch(`${t.httpUrl}${path}`, {
        method: target.method,
        headers: { 'content-type': 'application/json' },
        ...(target.method === 'GET' ? {} : { body: text }),
        signal: AbortSignal.timeout(10_000),
      });
      const raw = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = { message: raw };
      }
      return judge(res.status, body);
    } catch (err) {
      return { ok: false, kind: 'hang' as const, detail: (err as Error).message };
    }
  };

  /** Valid traffic between fuzz inputs: a metadata round trip and a real encode. */
  const validTraffic = async (n: number) => {
    const id = `valid-${n}`;
    const pub = await natsCall(
      nc,
      t,
      'publish_metadata',
      validBody({ via: 'nats', dp: 'publish_metadata' }, id),
    );
    const wait = await natsCall(nc, t, 'wait_metadata', { req_id: id, timeout_ms: 2000 });
    const enc = await natsCall(nc, t, 'encode', encodeBody(`${id}-enc`, [png]));
    const ok = !pub.err && !!wait.response && !enc.err;
    valid[ok ? 'ok' : 'failed']++;
    await natsCall(nc, t, 'release', { req_id: `${id}-enc` });
  };

  it('answers every input with a valid answer, a named 4xx or a documented 5xx; never hangs or crashes', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(input, async ({ target, mutation, id }) => {
        const text = bodyText(target, mutation, id);
        const outcome =
          target.via === 'nats' ? await viaNats(target.dp, text) : await viaHttp(target, text, id);
        counts.set(outcome.kind, (counts.get(outcome.kind) ?? 0) + 1);
        const name =
          target.via === 'nats' ? `nats ${target.dp}` : `${target.method} ${target.path}`;
        if (!outcome.ok) failures.push({ target: name, body: text.slice(0, 300), outcome });
        if (++n % 50 === 0) await validTraffic(n);
        return outcome.ok;
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 600_000);

  it('keeps serving valid traffic in between, and drains the registry and request state to zero', async () => {
    await validTraffic(0);
    expect(valid.failed).toBe(0);
    expect(await waitFor(() => drained(t.httpUrl), TTL_MS * 4, 200)).toBe(true);
  }, 60_000);

  afterAll(() => {
    const summary = {
      runs: RUNS,
      seed: SEED,
      outcomes: Object.fromEntries(counts),
      valid_traffic: valid,
      failures: failures.slice(0, 20),
    };
    process.stdout.write(`fuzz summary: ${JSON.stringify(summary)}\n`);
    if (OUT) {
      mkdirSync(dirname(OUT), { recursive: true });
      writeFileSync(join(OUT, 'fuzz.json'), JSON.stringify(summary, null, 2));
    }
  });
});
