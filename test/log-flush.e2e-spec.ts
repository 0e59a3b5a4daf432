import { sharedNatsUrl, uniquePrefix } from './support/app';
import { waitFor } from './support/calls';
import { startServiceProcess } from './support/service-process';

/**
 * sigterm-loses-last-logs: Nest's shutdown hooks ended the process by raising the signal
 * again, a death that skips the 'exit' event on which pino writes out what it still holds.
 * Whatever was logged while stdout was slow to read (a busy log shipper, a loaded CI) was
 * lost: one fresh-clone CI run missed the drain's "handed 5 staged embedding(s)" report,
 * the last line a stopping instance writes. Here stdout is not read while 600 request lines
 * are logged and the service is stopped; every line must arrive once reading resumes.
 */
describe('a SIGTERM stop writes out every log line first (e2e, built service process)', () => {
  it('sigterm-loses-last-logs: lines logged while stdout was not read arrive after the stop, and the exit code is 0', async () => {
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_LOG_LEVEL: 'info',
      EPD_LOG_FORMAT: 'json',
    });
    const stdout = svc.proc.stdout!;
    // All of it (the harness keeps the last 200 kB only).
    let all = '';
    stdout.on('data', (b: Buffer) => (all += b.toString()));
    const closed = new Promise<void>((r) => svc.proc.once('close', () => r()));
    try {
      // Not read from here: the pipe (64 KiB) fills, and pino holds the rest.
      stdout.pause();
      const count = 600;
      for (let n = 0; n < count; n++) {
        const res = await fetch(`${svc.url}/admin/registry`, {
          headers: { 'x-request-id': `flush-${n}-${'x'.repeat(100)}` },
        });
        expect(res.status).toBe(200);
      }
      svc.proc.kill('SIGTERM');
      // Its shutdown is over once HTTP is closed (or it has exited): the lines it still held
      // are either waiting to be written or, as before, gone with it.
      await waitFor(
        () =>
          svc.proc.exitCode !== null ||
          svc.proc.signalCode !== null ||
          fetch(`${svc.url}/health/live`).then(
            () => false,
            () => true,
          ),
        30_000,
        50,
      );
      stdout.resume();
      await closed;
      const logged = new Set([...all.matchAll(/"flush-(\d+)-x+"/g)].map((m) => Number(m[1])));
      const missing = Array.from({ length: count }, (_, n) => n).filter((n) => !logged.has(n));
      expect({ missing: missing.length, first: missing.slice(0, 5) }).toEqual({
        missing: 0,
        first: [],
      });
      expect({ code: svc.proc.exitCode, signal: svc.proc.signalCode }).toEqual({
        code: 0,
        signal: null,
      });
    } finally {
      stdout.resume();
      await svc.stop();
    }
  }, 60_000);
});
