import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** Reads a file's text, or undefined when it is not there (not in a cgroup, not Linux). */
type Read = (path: string) => string | undefined;

const readText: Read = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * The CPUs this process may use: the cores the kernel lets it run on, or fewer when its
 * cgroup has a CPU quota (a Kubernetes CPU limit; Docker's --cpus), rounded up. Thread
 * planning from the node's cores alone put, in a pod limited to 2 CPUs on a 64-core node,
 * 32 inference threads in each of 2 DP workers, throttled by the quota.
 *
 * cgroup v2: `/sys/fs/cgroup/cpu.max` ("max 100000", or "<quota> <period>"); v1:
 * `cpu.cfs_quota_us` (-1 for none) over `cpu.cfs_period_us`.
 */
export function usableCpus(read: Read = readText, cores = availableParallelism()): number {
  const quota = quotaCpus(read);
  return quota === undefined ? cores : Math.max(1, Math.min(cores, Math.ceil(quota)));
}

function quotaCpus(read: Read): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  if (v2 && v2.length === 2) {
    const [quota, period] = v2.map(Number) as [number, number];
    if (v2[0] === 'max') return undefined;
    return quota > 0 && period > 0 ? quota / period : undefined;
  }
  const quota = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim());
  const period = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
  return quota > 0 && period > 0 ? quota / period : undefined;
}
