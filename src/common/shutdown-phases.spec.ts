import { Logger } from '@nestjs/common';
import { Clock } from './clock';
import { SHUTDOWN_PHASES, ShutdownPhases } from './shutdown-phases';

describe('ShutdownPhases (the stop order in one place)', () => {
  beforeEach(() => jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined));
  afterEach(() => jest.restoreAllMocks());

  it('runs the phases in their declared order, whatever order the steps were added in', async () => {
    const phases = new ShutdownPhases(new Clock());
    const log: string[] = [];
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    phases.on('close-registry', 'registry', () => Promise.resolve(void log.push('registry')));
    phases.on('leave-roster', 'roster', () => Promise.resolve(void log.push('roster')));
    phases.on('flush-cache', 'cache', () => Promise.resolve(void log.push('cache')));
    phases.on('hand-off', 'handoff', async () => {
      log.push('handoff started');
      await slow;
      log.push('handoff done');
    });
    const running = phases.run();
    await Promise.resolve();
    // The next phase waits for every step of this one.
    expect(log).toEqual(['handoff started']);
    release();
    await running;
    expect(log).toEqual(['handoff started', 'handoff done', 'cache', 'roster', 'registry']);
    expect(phases.view().map((p) => p.phase)).toEqual([...SHUTDOWN_PHASES]);
  });

  it('a failing step is logged and does not stop its phase or the next; it all runs once', async () => {
    const phases = new ShutdownPhases(new Clock());
    const ran: string[] = [];
    phases.on('hand-off', 'broken', () => Promise.reject(new Error('object store gone')));
    phases.on('hand-off', 'other', () => Promise.resolve(void ran.push('other')));
    phases.on('close-registry', 'registry', () => Promise.resolve(void ran.push('registry')));
    await Promise.all([phases.run(), phases.beforeApplicationShutdown()]);
    await phases.run();
    expect(ran).toEqual(['other', 'registry']);
    expect(Logger.prototype.warn).toHaveBeenCalledTimes(1);
  });

  it('every step is told when the shutdown began, so that steps of later phases keep to one budget', async () => {
    let now = 1_000;
    const phases = new ShutdownPhases({ now: () => now } as Clock);
    const told: [string, number][] = [];
    phases.on('hand-off', 'handoff', (at) => {
      told.push(['handoff', at]);
      now += 700; // the hand-off took 700 ms
      return Promise.resolve();
    });
    phases.on('flush-cache', 'cache', (at) => Promise.resolve(void told.push(['cache', at])));
    await phases.run();
    expect(told).toEqual([
      ['handoff', 1_000],
      ['cache', 1_000],
    ]);
  });
});
