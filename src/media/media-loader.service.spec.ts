import { Clock } from '../common/clock';
import { createHash } from 'node:crypto';
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config/config.loader';
import { MediaLoader } from './media-loader.service';

/** MediaLoader against a real HTTP server on 127.0.0.1 and real files (no mocks of the world). */
describe('MediaLoader', () => {
  let server: Server;
  let base: string;
  const body = Buffer.from('0123456789abcdef');

  beforeAll(async () => {
    server = createServer((req, res) => {
      const url = req.url ?? '';
      if (url === '/ok') return res.writeHead(200).end(body);
      if (url === '/to-ok') return res.writeHead(302, { location: '/ok' }).end();
      if (url === '/to-elsewhere')
        return res.writeHead(302, { location: 'http://not-allowed.invalid/x' }).end();
      if (url === '/to-ftp') return res.writeHead(302, { location: 'ftp://127.0.0.1/x' }).end();
      const hop = /^\/slow\/(\d)$/.exec(url);
      if (hop) {
        const n = Number(hop[1]);
        setTimeout(
          () => res.writeHead(302, { location: n < 3 ? `/slow/${n + 1}` : '/ok' }).end(),
          150,
        );
        return;
      }
      if (url === '/big') return res.writeHead(200).end(Buffer.alloc(64));
      if (url === '/loop') return res.writeHead(302, { location: '/loop' }).end();
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const loader = (env: Record<string, string> = {}) =>
    new MediaLoader(
      loadConfig({
        EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
        EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
        ...env,
      }).config,
      new Clock(),
    );
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => 'loaded',
      (e: Error) => e.message,
    );

  it('loads a URL and follows a redirect within the allow-list', async () => {
    expect(await loader().load({ url: `${base}/to-ok` })).toEqual(body);
  });

  it('re-checks every redirect against the allow-list and the scheme', async () => {
    expect(await failure(loader().load({ url: `${base}/to-elsewhere` }))).toMatch(
      /domain not-allowed\.invalid is not in EPD_ALLOWED_MEDIA_DOMAINS/,
    );
    expect(await failure(loader().load({ url: `${base}/to-ftp` }))).toMatch(
      /unsupported scheme ftp:/,
    );
    expect(await failure(loader().load({ url: `${base}/loop` }))).toMatch(/more than 3 redirects/);
  });

  it('caps the size of URLs, data URIs, base64 and files at EPD_MEDIA_MAX_BYTES', async () => {
    const small = loader({ EPD_MEDIA_MAX_BYTES: '32' });
    expect(await failure(small.load({ url: `${base}/big` }))).toMatch(
      /media is larger than 32 bytes \(EPD_MEDIA_MAX_BYTES\)/,
    );
    const b64 = Buffer.alloc(64).toString('base64');
    expect(await failure(small.load({ url: `data:image/png;base64,${b64}` }))).toMatch(/larger/);
    expect(await failure(small.load({ url: b64 }))).toMatch(/larger/);
    const root = mkdtempSync(join(tmpdir(), 'epd-media-'));
    writeFileSync(join(root, 'big.bin'), Buffer.alloc(64));
    const files = loader({ EPD_MEDIA_MAX_BYTES: '32', EPD_MEDIA_ROOT: root });
    expect(await failure(files.load({ url: join(root, 'big.bin') }))).toMatch(/larger/);
    // A limit, answered as too many pixels is: 413 limit_exceeded, not a load failure.
    await expect(small.load({ url: b64 })).rejects.toMatchObject({
      code: 413,
      type: 'limit_exceeded',
    });
  });

  it('gives one timeout to the whole redirect chain, not one per hop', async () => {
    // Three hops of 150 ms: each fits in 300 ms, the chain does not.
    const l = loader({ EPD_MEDIA_FETCH_TIMEOUT_MS: '300' });
    expect(await failure(l.load({ url: `${base}/slow/1` }))).toMatch(/timed out after 300 ms/);
  });

  it("ends loading at the request's deadline with a 504", async () => {
    const err = await loader()
      .load({ url: `${base}/slow/1` }, 'r', Date.now() + 200)
      .catch((e: { code: number; type: string }) => e);
    expect(err).toMatchObject({ code: 504, type: 'load_timeout' });
  });

  it('reads files only under EPD_MEDIA_ROOT, and no symlink out of it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'epd-media-'));
    const outside = mkdtempSync(join(tmpdir(), 'epd-outside-'));
    writeFileSync(join(outside, 'secret'), 'x');
    symlinkSync(join(outside, 'secret'), join(root, 'link'));
    const l = loader({ EPD_MEDIA_ROOT: root });
    expect(await failure(l.load({ url: join(root, 'link') }))).toMatch(/outside the media root/);
    expect(await failure(l.load({ url: '/etc/passwd' }))).toMatch(/outside the media root/);
    expect(await failure(loader().load({ url: '/etc/passwd' }))).toMatch(/file paths are disabled/);
  });

  it('verifies content_hash', async () => {
    const sha = createHash('sha256').update(body).digest('hex');
    expect(await loader().load({ url: `${base}/ok`, content_hash: `sha256:${sha}` })).toEqual(body);
    const err = await loader()
      .load({ url: `${base}/ok`, content_hash: '0'.repeat(64) })
      .catch((e: { type: string }) => e);
    expect(err).toMatchObject({ code: 400, type: 'hash_mismatch' });
  });
});
