import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * `worker-terminated-mid-load-aborts-process`. CI aborted the whole e2e run once with
 * `v8::Module::IsGraphAsync must be used on an instantiated module`, from a worker thread
 * inside Node 20's synchronous require of the ESM audio decoders; terminating the
 * inference worker while ONNX Runtime's addon loads aborts the same way (`terminate called
 * after throwing an instance of 'Napi::Error'`). Both happened when a pool was closed
 * right after it was opened (a short-lived app). Reproduced before the fix by this probe:
 * one run in two aborted within 120 rounds. Now closePool waits for every thread to
 * announce its module loaded. Run in a child process: an abort would take jest with it.
 */
describe('worker pools closed while their threads load (e2e, real workers)', () => {
  it('never abort the process', () => {
    const probe = join(__dirname, 'fixtures', 'probes', 'pool-churn.js');
    const run = spawnSync(process.execPath, [probe, '120'], { encoding: 'utf8', timeout: 120_000 });
    expect({ status: run.status, signal: run.signal, tail: run.stderr.slice(-500) }).toEqual({
      status: 0,
      signal: null,
      tail: '',
    });
    expect(run.stdout).toContain('survived 120 rounds');
  }, 150_000);
});
