import { pause } from '../../test/support/wait';
import { MMError } from '../common/errors/mm-error';
import { formatReport, runLoad } from './load';

describe('epd load', () => {
  it('counts successes and errors by type, releases what it encoded, and reports percentiles', async () => {
    const released: string[] = [];
    let n = 0;
    const client = {
      encode: async (body: { req_id: string }) => {
        await pause(2, 'an encode takes a moment');
        if (++n % 4 === 0)
          throw new MMError('encoder is at capacity', 503, body.req_id, 'at_capacity');
        return { req_id: body.req_id } as never;
      },
      release: (id: string) => {
        released.push(id);
        return Promise.resolve();
      },
    };
    const report = await runLoad(client, ['a', 'b'], {
      concurrency: 3,
      durationS: 0.3,
      generated: 2,
      repeatRatio: 0,
      timeoutMs: 1000,
      maxInFlight: 10,
    });
    expect(report.mode).toBe('concurrency');
    expect(report.sent).toBe(report.ok + (report.errors.at_capacity ?? 0));
    expect(report.errors.at_capacity).toBeGreaterThan(0);
    expect(released).toHaveLength(report.ok);
    expect(report.latency_ms.p50).toBeGreaterThan(0);
    expect(report.latency_ms.p99).toBeGreaterThanOrEqual(report.latency_ms.p50);
    expect(formatReport(report)).toMatch(/errors: at_capacity\s+\d+/);
  });

  it('sends repeats from the hot tenth of the images at the repeat ratio', async () => {
    const seen: string[] = [];
    const client = {
      encode: (body: { req_id: string; mm_items: unknown[] }) => {
        seen.push(body.mm_items[0] as string);
        return Promise.resolve({ req_id: body.req_id } as never);
      },
      release: () => Promise.resolve(),
    };
    const images = Array.from({ length: 20 }, (_, i) => `img${i}`);
    await runLoad(
      client,
      images,
      { rate: 200, durationS: 0.5, generated: 0, repeatRatio: 1, timeoutMs: 1000, maxInFlight: 10 },
      undefined,
    );
    expect(seen.length).toBeGreaterThan(50);
    expect(new Set(seen)).toEqual(new Set(['img0', 'img1']));
  });
});
