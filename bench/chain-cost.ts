/**
 * Child process of encode-cost: the bare stages (decode, resize, patchify), the bare
 * chain (all of them and the forward) and the bare forward, in a process of its own. The
 * service preprocesses in a worker thread whose heap holds little; in the benchmark's own
 * process (images, sessions, results) the same work also paid for collections of that
 * large heap (4–13 core-ms more per 1024×768 patchify), which neither the service nor
 * the reference Python processor pays.
 *
 * Usage: forked with the image's path; answers each IPC message (a stage name: 'decode',
 * 'resize', 'patchify', 'forward' or 'chain') with its core-ms (process CPU, every
 * thread) and page faults, and with the resize's kind once loaded.
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { bareStages, benchSession } from './bare-stages';

sharp.concurrency(1);

export type ChildStage = 'decode' | 'resize' | 'patchify' | 'forward' | 'chain';
/** A stage's cost in this process: core-ms, and minor page faults (fresh memory touched). */
export interface ChildAnswer {
  ms: number;
  faults: number;
}

async function main() {
  const stages = await bareStages(readFileSync(process.argv[2]!), await benchSession());
  const run: Record<ChildStage, () => unknown> = {
    decode: stages.decode,
    resize: stages.resize,
    patchify: stages.pix,
    forward: stages.forward,
    chain: stages.chain,
  };
  process.on('message', (cmd: ChildStage) => {
    const c0 = process.cpuUsage();
    const f0 = process.resourceUsage().minorPageFault;
    void Promise.resolve(run[cmd]()).then(() => {
      const c = process.cpuUsage(c0);
      const answer: ChildAnswer = {
        ms: (c.user + c.system) / 1000,
        faults: process.resourceUsage().minorPageFault - f0,
      };
      process.send!(answer);
    });
  });
  process.send!({ ready: true, resizeKind: stages.resizeKind });
}

void main();
