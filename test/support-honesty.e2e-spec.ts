import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehindAfterTtl } from './support/ledger';

/**
 * The reliability suite's own counters cannot pass what they failed to observe ("Hardening,
 * third pass", part 3): `recordFault` let NaN through (`NaN > bound` is false), and
 * `leftBehindAfterTtl` returned NaN when its admin read failed.
 */
describe('the fault report fails on what it could not count', () => {
  // These probes are not faults of the service: kept out of the reliability table.
  const out = process.env.EPD_RELIABILITY_OUT;
  beforeAll(() => delete process.env.EPD_RELIABILITY_OUT);
  afterAll(() => {
    if (out !== undefined) process.env.EPD_RELIABILITY_OUT = out;
  });
  const ledger = async () => {
    const l = new CallLedger();
    await l.track(
      'one',
      1000,
      () => Promise.resolve(1),
      () => ({ ok: true }),
    );
    return l;
  };

  it.each([Number.NaN, -1, 0.5, Infinity])('a left-behind count of %p fails', async (n) => {
    const l = await ledger();
    expect(() =>
      recordFault('probe', { fault: 'none', ledger: l, silentlyLost: 0, leftBehind: n }),
    ).toThrow(/left behind/);
    expect(() =>
      recordFault('probe', { fault: 'none', ledger: l, silentlyLost: n, leftBehind: 0 }),
    ).toThrow(/silently lost/);
  });

  it('a count within its bounds passes', async () => {
    const l = await ledger();
    expect(
      recordFault('probe', { fault: 'none', ledger: l, silentlyLost: 0, leftBehind: 0 }),
    ).toMatchObject({ leftBehind: 0 });
  });

  describe('leftBehindAfterTtl', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      // An admin API that answers 401 to everything (a missing token, say).
      server = createServer((_req, res) => res.writeHead(401).end('{}'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise((r) => server.close(r)));

    it('throws when the admin API cannot be read, instead of returning NaN', async () => {
      await expect(leftBehindAfterTtl(url, ['a'], 600)).rejects.toThrow(/could not be read.*401/);
    });
  });
});
