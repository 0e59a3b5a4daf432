import { availableParallelism } from 'node:os';
import { usableCpus } from './cpu-quota';

const files =
  (f: Record<string, string>) =>
  (path: string): string | undefined =>
    f[path];

describe('usableCpus: the cores, or the cgroup CPU quota when lower', () => {
  it('no cgroup files (not Linux, not in a cgroup): the cores', () => {
    expect(usableCpus(files({}), 64)).toBe(64);
  });

  it('cgroup v2 without a limit ("max"): the cores', () => {
    expect(usableCpus(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }), 64)).toBe(64);
  });

  it('cgroup v2 with a 2-CPU limit on a 64-core node: 2', () => {
    expect(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' }), 64)).toBe(2);
  });

  it('a fractional limit is rounded up, and never below 1', () => {
    expect(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '150000 100000' }), 64)).toBe(2);
    expect(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '10000 100000' }), 64)).toBe(1);
  });

  it('a limit above the cores: the cores', () => {
    expect(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '800000 100000' }), 4)).toBe(4);
  });

  it('cgroup v1: quota over period; -1 means none', () => {
    const v1 = (quota: string) =>
      files({
        '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': quota,
        '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000',
      });
    expect(usableCpus(v1('300000'), 64)).toBe(3);
    expect(usableCpus(v1('-1'), 64)).toBe(64);
  });

  it('this machine: at least 1, at most its cores', () => {
    const n = usableCpus();
    expect(n).toBeGreaterThanOrEqual(1);
    expect(n).toBeLessThanOrEqual(availableParallelism());
  });
});
