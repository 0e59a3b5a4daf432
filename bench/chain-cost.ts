/**
 * Child process of encode-cost: the bare chain (decode, resize, patchify, forward) and the
 * bare forward that the service is paired with, in a process of its own. The service
 * preprocesses in a worker thread whose heap holds little; in the benchmark's own process
 * (images, sessions, results) each patchify's fresh 18.8 MB output at 1024×768 cost 4–13
 * core-ms more than a reused one, in collections of that large heap, and the service's
 * overhead was measured against that inflated chain.
 *
 * Usage: forked with the image's path; answers each IPC message 'chain' or 'forward' with
 * its core-ms (process CPU, every thread), and 'ready' once loaded.
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { bareStages, benchSession } from './bare-stages';

sharp.concurrency(1);

async function main() {
  const stages = await bareStages(readFileSync(process.argv[2]!), await benchSession());
  process.on('message', (cmd: unknown) => {
    const c0 = process.cpuUsage();
    const run = cmd === 'chain' ? stages.chain() : stages.forward();
    void run.then(() => {
      const c = process.cpuUsage(c0);
      process.send!((c.user + c.system) / 1000);
    });
  });
  process.send!('ready');
}

void main();
