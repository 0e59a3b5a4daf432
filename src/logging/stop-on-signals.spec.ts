import { setTimeout as after } from 'node:timers/promises';
import { flushLogs, type FlushableLog } from './stop-on-signals';

const never = new Promise<void>(() => undefined);

describe('flushLogs', () => {
  it('resolves flushed once the logger says every line is written', async () => {
    let done: ((err?: Error) => void) | undefined;
    const log: FlushableLog = { flush: (cb) => (done = cb) };
    const result = flushLogs(never, log);
    done!();
    await expect(result).resolves.toBe('flushed');
  });

  it('resolves timed_out after its bound when the reader of stdout does not read', async () => {
    const log: FlushableLog = { flush: () => undefined };
    await expect(flushLogs(after(20), log)).resolves.toBe('timed_out');
  });

  it('resolves failed when the flush reports an error or throws', async () => {
    await expect(flushLogs(never, { flush: (cb) => cb!(new Error('EPIPE')) })).resolves.toBe(
      'failed',
    );
    await expect(
      flushLogs(never, {
        flush: () => {
          throw new Error('SonicBoom destroyed');
        },
      }),
    ).resolves.toBe('failed');
  });

  it('does not wait when there is no logger yet (a stop before the app made one)', async () => {
    await expect(flushLogs(never, undefined)).resolves.toBe('flushed');
  });

  it('a give-up already due (the stop used all its time) does not wait', async () => {
    await expect(flushLogs(after(0), { flush: () => undefined })).resolves.toBe('timed_out');
  });
});
