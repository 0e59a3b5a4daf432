import { closeLeftOpen } from './left-open';

// After every e2e file, whatever its tests did: stop what they started and left running.
afterAll(async () => {
  const left = await closeLeftOpen();
  if (left > 0) process.stderr.write(`stopped ${left} process(es) or app(s) a test left running\n`);
}, 30_000);
