import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { flatPng, flatPngService } from './support/amplification';
import { encodeBody } from './support/calls';
import { dataUri } from './support/media';
import type { ServiceProcess } from './support/service-process';

const MiB = 2 ** 20;

interface WorkStats {
  in_use_bytes: number;
  waiting: number;
}

/**
 * M1 of "Hardening, third pass": when one item of a request failed, its sibling loads kept
 * running and charged the working-memory budget after the request had released its lease,
 * and those bytes were never given back. With EPD_WORK_MAX_BYTES=256 MiB, requests of a
 * malformed data URI beside 19 MiB files left 247 MiB held with no encode running (a
 * 1000² encode then got 503 memory_busy, still 15 s later); a 404 beside 19 MiB downloads
 * held all 256 MiB. The budget drains to zero after such requests, and an ordinary encode
 * is served.
 */
describe('M1: a failed item does not leak the work budget (e2e, built service process)', () => {
  let svc: ServiceProcess;
  let mediaRoot: string;
  let post: Awaited<ReturnType<typeof flatPngService>>['post'];
  let server: Server;
  let port: number;
  const big = Buffer.alloc(19 * MiB, 7);

  beforeAll(async () => {
    // A media server on loopback: a 404 at once, and 19 MiB bodies sent in slow chunks.
    server = createServer((req, res) => {
      if (req.url === '/missing') return void res.writeHead(404).end('no');
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(big.length) });
      let at = 0;
      const push = () => {
        if (at >= big.length) return void res.end();
        res.write(big.subarray(at, (at += MiB)));
        setTimeout(push, 5);
      };
      push();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    ({ svc, mediaRoot, post } = await flatPngService({
      EPD_WORK_MAX_BYTES: String(256 * MiB),
      EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
    }));
    for (let i = 0; i < 4; i++) writeFileSync(join(mediaRoot, `big-${i}.png`), big);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await new Promise((r) => server?.close(r));
  });

  const work = async () =>
    ((await (await fetch(`${svc.url}/admin/encoder`)).json()) as { memory: WorkStats }).memory;

  it.each([
    [
      'a malformed data URI beside 19 MiB files',
      () => [
        'data:image/png;base64,@@@@',
        ...[0, 1, 2, 3].map((i) => join(mediaRoot, `big-${i}.png`)),
      ],
    ],
    [
      'a 404 beside 19 MiB downloads',
      () => [
        `http://127.0.0.1:${port}/missing`,
        ...[0, 1, 2].map((i) => `http://127.0.0.1:${port}/big-${i}.png`),
      ],
    ],
  ])(
    '%s: every request is a 4xx, the budget drains to 0, and a normal encode is served',
    async (_, items) => {
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          post<{ type?: string }>('/encode', encodeBody(`m1-${i}-${Math.random()}`, items())),
        ),
      );
      const statuses = answers.map((a) => a.status);
      // Each names its bad item: 400 (malformed data URI) or 4xx from the media fetch.
      expect(statuses.filter((s) => s < 400 || s >= 500)).toEqual([]);
      const left = await work();
      expect({ in_use_bytes: left.in_use_bytes, waiting: left.waiting }).toEqual({
        in_use_bytes: 0,
        waiting: 0,
      });
      const ok = await post<{ embedding_len?: number }>(
        '/encode',
        encodeBody(`m1-ok-${Math.random()}`, [dataUri(await flatPng(1000), 'image/png')]),
      );
      expect(ok.status).toBe(200);
    },
    60_000,
  );
});
