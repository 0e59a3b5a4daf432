import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { startTestApp, type TestApp } from './support/app';

/**
 * readme-first-example-fails-on-a-photo: the README's first example put a photo's base64
 * into a shell argument (`-d "...$IMG..."`), and any photo over ~96 KB failed with
 * "Argument list too long". This runs the README's first block of "Try it" exactly as
 * written (only its host:port pointed at the test app) on a 5 MB photo.
 */
describe("the README's first example (e2e)", () => {
  let t: TestApp;
  const dir = mkdtempSync(join(tmpdir(), 'epd-readme-'));
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The first ```sh block after "## Try it". */
  const firstExample = () => {
    const readme = readFileSync(join(__dirname, '..', 'README.md'), 'utf8');
    const tryIt = readme.slice(readme.indexOf('## Try it'));
    const block = /```sh\n([\s\S]*?)```/.exec(tryIt)?.[1];
    if (!block) throw new Error('README has no ```sh block under "## Try it"');
    return block;
  };

  it('encodes a 5 MB photo, lists it staged and releases it', async () => {
    // Noise does not compress: a 2400x1800 JPEG at quality 100 is over 5 MB.
    const photo = await sharp(randomBytes(2400 * 1800 * 3), {
      raw: { width: 2400, height: 1800, channels: 3 },
    })
      .jpeg({ quality: 100 })
      .toBuffer();
    writeFileSync(join(dir, 'photo.jpg'), photo);
    expect(statSync(join(dir, 'photo.jpg')).size).toBeGreaterThan(5_000_000);

    const { host } = new URL(t.httpUrl);
    const script = firstExample().replaceAll('localhost:30000', host);
    expect(script).toContain(host);
    // Asynchronously: the service under test runs in this process.
    const { stdout: out } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const [encoded, listed] = out.split('\n').filter((l) => l.startsWith('{'));
    expect(JSON.parse(encoded!)).toMatchObject({
      req_id: 'img-1',
      embedding_dim: 1024,
      embedding_len: expect.any(Number) as number,
    });
    expect(JSON.parse(listed!)).toMatchObject({
      requests: [expect.objectContaining({ req_id: 'img-1' })],
    });
    const after = (await (await fetch(`${t.httpUrl}/admin/requests`)).json()) as {
      requests: unknown[];
    };
    expect(after.requests).toEqual([]);
  });
});
