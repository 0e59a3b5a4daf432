import { InstanceSubjects, WorkerSubjects } from './served-subjects';

/** The subjects each DP role serves and names in its receipts (docs/nats-reference.md). */
describe('ServedSubjects', () => {
  it('a DP worker: its rank subject in the queue group, its own and its probe', () => {
    const w = new WorkerSubjects('epd', 'i1', 2);
    expect(w.of('wait_metadata')).toEqual({
      shared: ['epd.v1.rank.2.wait_metadata'],
      own: ['epd.v1.inst.i1.rank.2.wait_metadata'],
      probes: ['epd.v1.probe.i1.rank.2.wait_metadata'],
    });
    expect(w.askAgain('send', { kind: 'internal' })).toBe('epd.v1.inst.i1.rank.2.send');
    expect(w.askAgain('send', { kind: 'shared' })).toBe('epd.v1.probe.i1.rank.2.send');
    expect(w.askAgain('send', { kind: 'tenant', tenant: 'acme' })).toBe(
      'epd.v1.t.acme.probe.i1.rank.2.send',
    );
  });

  it("one process: the shared and every tenant's subject, rank 0's and its own, both probes", () => {
    const single = new InstanceSubjects('epd', 'i1', 0);
    expect(single.of('wait_metadata')).toEqual({
      shared: ['epd.v1.wait_metadata', 'epd.v1.t.*.wait_metadata'],
      own: ['epd.v1.rank.0.wait_metadata', 'epd.v1.inst.i1.wait_metadata'],
      probes: ['epd.v1.probe.i1.wait_metadata', 'epd.v1.t.*.probe.i1.wait_metadata'],
    });
    expect(single.askAgain('send', { kind: 'internal' })).toBe('epd.v1.inst.i1.send');
    expect(single.askAgain('send', { kind: 'tenant', tenant: 'acme' })).toBe(
      'epd.v1.t.acme.probe.i1.send',
    );
  });

  it('a DP supervisor: no rank subject (its workers serve those); an operator call has no tenant subjects', () => {
    const sup = new InstanceSubjects('epd', 'i1');
    expect(sup.of('wait_metadata').own).toEqual(['epd.v1.inst.i1.wait_metadata']);
    expect(sup.of('stats')).toEqual({
      shared: ['epd.v1.stats'],
      own: ['epd.v1.inst.i1.stats'],
      probes: ['epd.v1.probe.i1.stats'],
    });
  });
});
