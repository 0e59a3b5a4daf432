import { spawn } from 'node:child_process';
import { SERVICE_NODE_FLAGS } from '../src/common/node-flags';
import { sharedNatsUrl, startTestApp, uniquePrefix } from './support/app';
import { waitFor } from './support/calls';
import { pause } from './support/wait';
import { freePort } from './support/nats-server';
import { childPids, exited, MAIN } from './support/service-process';

/**
 * worker-terminated-mid-native: closing the app while the inference worker was still
 * inside ONNX Runtime (loading the models right after start, or a forward) terminated the
 * thread mid-native-call, and node-addon-api threw into the dying environment: the whole
 * process aborted with `terminate called after throwing an instance of 'Napi::Error'`
 * (reproduced 2 of 2 runs with this test before the fix). The pools now close gracefully.
 * The assertion is that this jest process survives to count the test.
 */
it('closing the app at any moment after start never aborts the process', async () => {
  for (let i = 0; i < 8; i++) {
    const t = await startTestApp();
    await pause((i * 41) % 250, 'the close lands at a different moment of start-up each time');
    await t.close();
  }
});

/**
 * dp-worker-orphaned-at-boot: a DP worker whose supervisor was SIGKILLed while the worker
 * was still loading kept running, fully up, with no parent (found after a CI run: an
 * orphan from a supervisor-crash test still served HTTP 26 minutes later, and its
 * inherited stdout kept that jest process from exiting). The worker listens for its IPC
 * channel's 'disconnect' only once the app is built; a disconnect before that was missed.
 */
describe('a DP worker whose supervisor dies while it loads (e2e, built service)', () => {
  it('exits on its own instead of running orphaned', async () => {
    const supervisor = spawn(process.execPath, [...SERVICE_NODE_FLAGS, MAIN], {
      env: {
        ...process.env,
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_SUBJECT_PREFIX: uniquePrefix(),
        EPD_HTTP_PORT: String(await freePort()),
        EPD_DP_SIZE: '2',
        EPD_LOG_LEVEL: 'warn',
      },
      stdio: 'ignore', // the workers inherit it: no pipe of this process to hold open
    });
    let workers: number[] = [];
    try {
      // Forked at start-up; killed the moment both exist, long before they have loaded.
      expect(
        await waitFor(() => (workers = childPids(supervisor.pid!)).length === 2, 20_000, 5),
      ).toBe(true);
    } finally {
      supervisor.kill('SIGKILL');
    }
    try {
      expect(await waitFor(() => workers.every(exited), 30_000, 100)).toBe(true);
    } finally {
      for (const pid of workers.filter((p) => !exited(p))) process.kill(pid, 'SIGKILL');
    }
  }, 60_000);
});
