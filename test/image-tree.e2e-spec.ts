import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { projectRoot } from '../src/common/fs/project-root';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody } from './support/calls';
import { dataUri, image } from './support/media';
import { freePort } from './support/nats-server';
import { waitFor } from './support/wait';

const run = promisify(execFile);
const ROOT = projectRoot();
/** The image's user (`USER node`: uid 1000 in the Node images). */
const NODE_UID = '1000';

/**
 * The container image's smoke, run against the image's file tree: no container runtime or
 * base image is reachable from the machines this project is built on, so the tree the
 * Dockerfile's runtime stage assembles is assembled here the same way (its COPY lines:
 * package.json, config, the production node_modules from `npm ci --omit=dev` with
 * ONNXRUNTIME_NODE_INSTALL=skip, dist, the generated models), made read-only, and run as
 * the image's non-root user with the image's ENV: without a mounted model it refuses to
 * start (exit 78); with one mounted read-only it starts, turns ready, and encodes.
 */
describe("the image's file tree: read-only, non-root, model mounted (e2e)", () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-image-'));
  const app = join(dir, 'app');
  const mounted = join(dir, 'models');
  let env: Record<string, string> = {};
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    // What the runtime stage copies, in the Dockerfile's own words.
    const copies = [...runtime.matchAll(/^COPY (?:--from=\S+ )?(\S+) (\S+)$/gm)].map((m) =>
      m[1]!.replace(/^\/app\//, ''),
    );
    expect(copies).toEqual(['package.json', 'config', 'node_modules', 'dist', 'models']);
    // The image's ENV lines (`ENV A=1 \ B=2`), as the process will see them.
    const envBlock = /^ENV ([\s\S]*?)\n(?=\S)/m.exec(runtime)![1]!;
    env = Object.fromEntries([...envBlock.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    // mkdtemp's directory is the test runner's alone (0700): the image user must reach in.
    chmodSync(dir, 0o755);
    mkdirSync(app);
    for (const f of ['package.json', 'package-lock.json', '.npmrc'])
      cpSync(join(ROOT, f), join(app, f));
    await run(
      join(process.execPath, '..', 'npm'),
      ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'],
      {
        cwd: app,
        env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    rmSync(join(app, 'package-lock.json'));
    rmSync(join(app, '.npmrc'));
    cpSync(join(ROOT, 'config'), join(app, 'config'), { recursive: true });
    cpSync(join(ROOT, 'dist'), join(app, 'dist'), { recursive: true });
    // The build stage's `generate-models`: the default stand-ins.
    mkdirSync(join(app, 'models'));
    for (const f of ['vision-encoder.onnx', 'audio-encoder.onnx'])
      cpSync(join(ROOT, 'models', f), join(app, 'models', f));
    // A model directory, as the Deployment mounts one at /models (read-only).
    cpSync(join(ROOT, 'models', 'qwen2-vl-2b-reference'), mounted, { recursive: true });
    await run('chmod', ['-R', 'a-w', app, mounted]);
  }, 180_000);

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await run('chmod', ['-R', 'u+w', dir]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The image's CMD, as its user, in its tree, with its ENV and `extra`. */
  const start = (extra: Record<string, string>) => {
    const child = spawn(
      'setpriv',
      [
        '--reuid',
        NODE_UID,
        '--regid',
        NODE_UID,
        '--clear-groups',
        process.execPath,
        '--max-semi-space-size=64',
        'dist/main.js',
      ],
      {
        cwd: app,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', ...env, ...extra },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(code ?? signal)),
    );
    return { child, output: () => out, exited };
  };

  it('the tree is not writable by the image user', async () => {
    const probe = await run('setpriv', [
      '--reuid',
      NODE_UID,
      '--regid',
      NODE_UID,
      '--clear-groups',
      'sh',
      '-c',
      `touch ${join(app, 'dist', 'x')} 2>/dev/null && echo writable || echo read-only`,
    ]);
    expect(probe.stdout.trim()).toBe('read-only');
  });

  it('without a mounted model it refuses to start (exit 78), naming why', async () => {
    const port = await freePort();
    const svc = start({ EPD_HTTP_PORT: String(port), EPD_NATS_URL: sharedNatsUrl() });
    expect(await svc.exited).toBe(78);
    expect(svc.output()).toContain('refusing to serve a generated reference model');
  }, 60_000);

  it('with a model directory mounted, it starts, turns ready and encodes; SIGTERM ends it cleanly', async () => {
    const port = await freePort();
    const svc = start({
      EPD_HTTP_PORT: String(port),
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_MODEL_DIR: mounted,
      // The mounted directory holds the generated stand-in: allowed for this smoke only.
      EPD_ALLOW_REFERENCE_MODEL: 'true',
    });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      async () => (await fetch(`${url}/health/ready`).catch(() => undefined))?.status === 200,
      60_000,
      100,
      () => `not ready; output:\n${svc.output().slice(-2000)}`,
    );
    const item = dataUri(await image(448, 448, 'png'), 'image/png');
    const res = await request(url)
      .post('/encode')
      .send(encodeBody('image-1', [item]));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ embedding_len: 256, embedding_dim: 1536 });
    // JSON logs (the image's EPD_LOG_FORMAT), one object a line.
    const first = svc
      .output()
      .split('\n')
      .find((l) => l.startsWith('{'));
    expect(() => JSON.parse(first!) as unknown).not.toThrow();
    svc.child.kill('SIGTERM');
    // A clean close exits 0 once its logs are written out; the hard exit would be code 1.
    expect(await svc.exited).toBe(0);
  }, 120_000);
});
