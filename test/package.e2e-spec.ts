import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../src/common/fs/project-root';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { dataUri, image } from './support/media';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const run = promisify(execFile);
const NPM = join(process.execPath, '..', 'npm');

/**
 * The npm package (`npm pack`): what it holds, and that its `epd` binary and its SDK work
 * installed in a clean directory, against a running service. The install takes the
 * dependencies' tarballs from npm's cache (`npm ci` put them there) and their metadata from
 * the registry, without install scripts: the SDK and the CLI need none.
 */
describe('the npm package, installed in a clean directory (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-pack-'));
  const clean = join(dir, 'clean');
  let files: string[] = [];
  let svc: ServiceProcess | undefined;
  const prefix = uniquePrefix();

  beforeAll(async () => {
    const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', dir], {
      cwd: projectRoot(),
      maxBuffer: 64 * 1024 * 1024,
    });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    files = packed!.files.map((f) => f.path);
    await run('mkdir', ['-p', clean]);
    writeFileSync(
      join(clean, 'package.json'),
      JSON.stringify({ name: 'clean', version: '1.0.0', private: true }),
    );
    await run(
      NPM,
      [
        'install',
        '--prefer-offline',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        join(dir, packed!.filename),
      ],
      { cwd: clean, maxBuffer: 64 * 1024 * 1024 },
    );
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
    });
  }, 180_000);
  afterAll(async () => {
    await svc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the build, the default configuration and the project files; no sources, tests or models', () => {
    for (const f of [
      'dist/cli/epd.js',
      'dist/client/index.js',
      'dist/client/index.d.ts',
      'dist/main.js',
      'config/default.yaml',
      'LICENSE',
      'NOTICE',
      'README.md',
      'CHANGELOG.md',
      'package.json',
    ])
      expect(files).toContain(f);
    const outside = files.filter((f) => /^(src|test|bench|models|scripts|deploy|\.ci)\//.test(f));
    expect(outside).toEqual([]);
    expect(files.filter((f) => f.startsWith('config/') && f !== 'config/default.yaml')).toEqual([]);
  });

  const env = () => ({
    ...process.env,
    EPD_NATS_URL: sharedNatsUrl(),
    EPD_SUBJECT_PREFIX: prefix,
    EPD_HTTP_PORT: new URL(svc!.url).port,
  });

  it('its epd binary: --help succeeds, and status reads the running service', async () => {
    const epd = join(clean, 'node_modules', '.bin', 'epd');
    const help = await run(epd, ['--help'], { cwd: clean });
    expect(help.stdout).toMatch(/^usage: epd <command>/);
    const status = await run(epd, ['status'], { cwd: clean, env: env() });
    expect(status.stdout).toMatch(/^registry entries\s+\d+$/m);
  });

  it('its SDK: require("epd-encoder"), encode, wait for the metadata, release', async () => {
    const script = join(clean, 'sdk.js');
    writeFileSync(
      script,
      `const { EncoderClient } = require('epd-encoder');
(async () => {
  const client = await EncoderClient.connect({
    servers: process.env.EPD_NATS_URL,
    subjectPrefix: process.env.EPD_SUBJECT_PREFIX,
  });
  const encoded = await client.encode({
    req_id: 'pkg-1', modality: 'image', num_parts: 1, part_idx: 0, mm_items: [process.env.ITEM],
  });
  const meta = await client.waitMetadata('pkg-1', { timeoutMs: 5000 });
  await client.release('pkg-1');
  await client.close();
  process.stdout.write(JSON.stringify({ encoded, meta }));
})().catch((err) => { process.stderr.write(String(err)); process.exit(1); });
`,
    );
    const item = dataUri(await image(56, 56, 'png'), 'image/png');
    const { stdout } = await run(process.execPath, [script], {
      cwd: clean,
      env: { ...env(), ITEM: item },
    });
    const out = JSON.parse(stdout) as {
      encoded: { embedding_len: number };
      meta: { embedding_len: number };
    };
    expect(out.encoded.embedding_len).toBe(4);
    expect(out.meta.embedding_len).toBe(4);
  });
});
