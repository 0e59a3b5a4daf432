import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exited } from './support/service-process';
import { REPO_ROOT } from './support/repo-root';

/**
 * A failing e2e test ends the run ("Hardening, third pass", part 3: with the handoff broken
 * on purpose, the rolling-restart test failed as it should, but jest then never exited:
 * what the test started stayed open, and CI would have waited for its time limit). Runs
 * test/fails-on-purpose.e2e-spec.ts in a jest of its own: it must exit non-zero, report
 * the failure, and leave no service process behind.
 */
describe('a failed e2e run reports and ends (e2e)', () => {
  it('exits non-zero within seconds of the failure, with the service it started stopped', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'epd-fail-')), 'pids');
    const jest = spawn(
      process.execPath,
      [
        join(REPO_ROOT, 'node_modules', 'jest', 'bin', 'jest.js'),
        '--selectProjects',
        'e2e',
        '--runInBand',
        '--runTestsByPath',
        'test/fails-on-purpose.e2e-spec.ts',
      ],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, EPD_TEST_FAIL_ON_PURPOSE: '1', EPD_TEST_PID_FILE: pidFile },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    jest.stdout.on('data', (b: Buffer) => (out += b.toString()));
    jest.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const started = Date.now();
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => jest.kill('SIGKILL'), 90_000);
      jest.once('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    const seconds = (Date.now() - started) / 1000;
    expect({ code, killed: jest.signalCode }).toEqual({ code: 1, killed: null });
    expect(out).toMatch(/broken on purpose/);
    expect(out).toMatch(/Tests:\s+1 failed/);
    const pids = readFileSync(pidFile, 'utf8').trim().split('\n').map(Number);
    const alive = pids.filter((pid) => !exited(pid));
    // Whatever the outcome, nothing of the child run outlives this test.
    for (const pid of alive) process.kill(pid, 'SIGKILL');
    expect(pids.length).toBe(1);
    expect(alive).toEqual([]);
    process.stdout.write(`a failed run ended ${seconds.toFixed(1)} s after it started\n`);
  }, 120_000);
});
