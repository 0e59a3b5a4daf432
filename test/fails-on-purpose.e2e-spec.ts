import { appendFileSync } from 'node:fs';
import { sharedNatsUrl, startTestApp, uniquePrefix } from './support/app';
import { startServiceProcess } from './support/service-process';

/**
 * Runs only under EPD_TEST_FAIL_ON_PURPOSE=1 (test/run-ends-on-failure.e2e-spec.ts sets it
 * in a jest of its own): a test that starts a service process and an in-process app, then
 * fails before it stops either. The run must still report the failure and end.
 */
const onPurpose = process.env.EPD_TEST_FAIL_ON_PURPOSE === '1';

(onPurpose ? describe : describe.skip)(
  'a test that fails with what it started still running',
  () => {
    it('fails on purpose', async () => {
      const svc = await startServiceProcess({
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_SUBJECT_PREFIX: uniquePrefix(),
      });
      await startTestApp();
      const pidFile = process.env.EPD_TEST_PID_FILE;
      if (pidFile) appendFileSync(pidFile, `${svc.proc.pid}\n`);
      expect('the handoff').toBe('broken on purpose');
    }, 60_000);
  },
);
