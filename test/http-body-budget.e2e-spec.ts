import { connect as tcpConnect, type Socket } from 'node:net';
import { encodeBody, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { serviceWithClient, type ServiceProcess } from './support/service-process';

const MiB = 2 ** 20;

/**
 * M10: HTTP bodies were outside every budget. Unfinished bodies (64 MiB each, any number,
 * each held up to Node's 300 s request timeout) took RSS 222 → 719 MB for 20 s while the
 * work budget read 0. A body is now charged to the process's working-memory budget
 * (EPD_WORK_MAX_BYTES) as it arrives: one that does not fit is refused with 503
 * memory_busy and its connection closed, and one not received in full within
 * EPD_HTTP_BODY_TIMEOUT_MS is answered 408 body_timeout; either way its bytes go back.
 */
describe('M10: HTTP bodies are in the working-memory budget (e2e, built service)', () => {
  let svc: ServiceProcess;
  let close: () => Promise<void>;
  const sockets: Socket[] = [];
  const BUDGET = 48 * MiB;

  beforeAll(async () => {
    ({ svc, close } = await serviceWithClient({
      EPD_WORK_MAX_BYTES: String(BUDGET),
      EPD_HTTP_BODY_TIMEOUT_MS: '3000',
    }));
  }, 60_000);
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await close();
  });

  type Memory = { in_use_bytes: number; max_bytes: number };
  const memory = async () =>
    ((await (await fetch(`${svc.url}/admin/encoder`)).json()) as { memory: Memory }).memory;

  /**
   * A POST /encode whose headers declare `declared` bytes, of which `sent` are sent, then
   * nothing: resolves with what the server answered (status line and body), if anything.
   */
  const unfinished = (declared: number, sent: number) => {
    const port = Number(new URL(svc.url).port);
    const socket = tcpConnect(port, '127.0.0.1');
    sockets.push(socket);
    let answer = '';
    socket.on('data', (b: Buffer) => (answer += b.toString()));
    socket.on('error', () => undefined); // reset by the server after its answer
    const closed = new Promise<string>((r) => socket.once('close', () => r(answer)));
    socket.write(
      `POST /encode HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(MiB, 0x61);
    chunk.write('{"req_id":"slow","mm_items":["', 0);
    for (let n = 0; n < sent; n += MiB) socket.write(chunk.subarray(0, Math.min(MiB, sent - n)));
    return { socket, closed, answer: () => answer };
  };

  it('charges bodies as they arrive, refuses what does not fit with 503, times out an unfinished one with 408, and gives every byte back', async () => {
    // Three bodies of 20 MiB received, each declaring 60 MiB: 60 MiB do not fit 48 MiB.
    const slow = [0, 1, 2].map(() => unfinished(60 * MiB, 20 * MiB));
    // The first two are held (40 MiB charged); the third is refused once it no longer fits.
    const refusedOne = await Promise.race(slow.map((s) => s.closed));
    expect(refusedOne).toMatch(/^HTTP\/1\.1 503/);
    expect(refusedOne).toMatch(/"type":"memory_busy"/);
    expect(refusedOne).toMatch(/EPD_WORK_MAX_BYTES/);
    // Before: 0, whatever the bodies held.
    let inUse = 0;
    await waitFor(
      async () => (inUse = (await memory()).in_use_bytes) >= 40 * MiB,
      5000,
      50,
      () => `work budget holds ${inUse} bytes, want >= 40 MiB`,
    );
    expect((await memory()).in_use_bytes).toBeLessThanOrEqual(BUDGET);

    // Once the unfinished bodies time out (408), every byte goes back.
    const answers = await Promise.all(slow.map((s) => s.closed));
    const statuses = answers.map((a) => /^HTTP\/1\.1 (\d+)/.exec(a)?.[1]).sort();
    expect(statuses).toEqual(['408', '408', '503']);
    expect(answers.filter((a) => a.includes('"type":"body_timeout"'))).toHaveLength(2);
    await waitFor(
      async () => (inUse = (await memory()).in_use_bytes) === 0,
      5000,
      50,
      () => `work budget still holds ${inUse} bytes`,
    );

    // And the service works as before.
    const png = dataUri(await image(56, 56), 'image/png');
    const ok = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(encodeBody('after-bodies', [png])),
    });
    expect(ok.status).toBe(200);
    expect((await memory()).in_use_bytes).toBe(0);
  }, 60_000);

  it('a body that finishes in time is answered as before, and leaves nothing charged', async () => {
    const png = dataUri(await image(512, 512, 'png', { r: 1, g: 2, b: 3 }), 'image/png');
    const res = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(encodeBody('whole-body', [png])),
    });
    expect(res.status).toBe(200);
    await waitFor(async () => (await memory()).in_use_bytes === 0, 5000, 50);
  });
});
