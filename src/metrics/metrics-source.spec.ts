import { Counter, Registry } from 'prom-client';
import type { LocalRanks, RanksAsked } from '../routing/local-ranks';
import { metricsOf, type MetricsJson } from './metrics-source';

/** A DP supervisor's ranks: rank 0 answers with its registry, rank 1 is left out. */
async function supervisorRanks(): Promise<LocalRanks> {
  const worker = new Registry();
  worker.setDefaultLabels({ dp_rank: '0' });
  new Counter({ name: 'epd_test_calls_total', help: 'calls', registers: [worker] }).inc(3);
  const asked: RanksAsked<MetricsJson> = {
    answers: [{ rank: 0, value: await worker.getMetricsAsJSON() }],
    missing: [{ dp_rank: 1, reason: 'no answer within 1000 ms' }],
  };
  return { active: true, ask: () => Promise.resolve(asked) } as unknown as LocalRanks;
}

describe('metricsOf', () => {
  it("says, rank by rank, whether a supervisor's scrape holds each worker's series", async () => {
    const text = await (await metricsOf(await supervisorRanks())).metrics();
    expect(text).toMatch(/^epd_test_calls_total\{dp_rank="0"\} 3$/m);
    expect(text).toMatch(/^epd_encoder_dp_metrics_scraped\{dp_rank="0"\} 1$/m);
    expect(text).toMatch(/^epd_encoder_dp_metrics_scraped\{dp_rank="1"\} 0$/m);
    // Rank 1's series are absent, not zero: the gauge is its only line.
    const rank1 = text.split('\n').filter((line) => line.includes('dp_rank="1"'));
    expect(rank1).toEqual(['epd_encoder_dp_metrics_scraped{dp_rank="1"} 0']);
  });

  it('is the process registry, without the gauge, outside a DP supervisor', async () => {
    const text = await (await metricsOf({ active: false } as unknown as LocalRanks)).metrics();
    expect(text).not.toContain('epd_encoder_dp_metrics_scraped');
  });
});
