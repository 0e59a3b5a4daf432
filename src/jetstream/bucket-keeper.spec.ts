import type { JetStreamManager } from '@nats-io/jetstream';
import { Clock } from '../common/clock';
import type { NatsConnectionService } from '../transport/nats-connection.service';
import { BucketKeeper } from './bucket-keeper';
import { StoreConfigError } from './bucket-settings';
import { Logger } from '@nestjs/common';
import { waitFor } from '../../test/support/wait';

/** A server whose streams are a set: info() of one not in it fails as JetStream's does. */
class FakeKeeper extends BucketKeeper {
  readonly streams = new Set<string>();
  infos = 0;
  protected override manager(): Promise<JetStreamManager> {
    return Promise.resolve({
      streams: {
        info: (name: string) => {
          this.infos++;
          return this.streams.has(name)
            ? Promise.resolve({})
            : Promise.reject(new Error('stream not found'));
        },
      },
    } as unknown as JetStreamManager);
  }
}

describe('BucketKeeper', () => {
  let now: number;
  let keeper: FakeKeeper;
  beforeEach(() => {
    now = 1_000_000;
    keeper = new FakeKeeper({} as NatsConnectionService, { now: () => now } as Clock);
  });
  afterEach(() => keeper.onApplicationShutdown());

  it('a failure on a bucket that is there changes nothing, and asks at most once a second', async () => {
    keeper.streams.add('KV_b');
    keeper.keep('b', 'KV_b', () => Promise.reject(new Error('not to be called')));
    expect(await keeper.failed('b')).toBe(false);
    expect(await keeper.failed('b')).toBe(false);
    expect(keeper.infos).toBe(1);
    now += 1000;
    expect(await keeper.failed('b')).toBe(false);
    expect(keeper.infos).toBe(2);
    expect(keeper.view()).toEqual({ missing: [], recreated: { b: 0 } });
  });

  it("a sweep's asking does not delay the first failure after a deletion: it is told so at once", async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    try {
      keeper.streams.add('KV_b');
      keeper.keep('b', 'KV_b', () => Promise.resolve(void keeper.streams.add('KV_b')));
      jest.advanceTimersByTime(10_000); // the sweep asks, and finds it there
      await new Promise((r) => setImmediate(r));
      expect(keeper.infos).toBe(1);
      keeper.streams.delete('KV_b');
      // Within the second after the sweep, a failure still asks (a failure's throttle is its own).
      expect(await keeper.failed('b')).toBe(true);
      expect(keeper.infos).toBe(2);
    } finally {
      jest.useRealTimers();
    }
  });

  it('a deleted bucket is missing (readiness down) until it is made again, then counted', async () => {
    let finish!: () => void;
    let calls = 0;
    keeper.keep('b', 'KV_b', () => {
      calls++;
      return new Promise<void>((r) => (finish = r)).then(() => void keeper.streams.add('KV_b'));
    });
    expect(await keeper.failed('b')).toBe(true);
    expect(keeper.view()).toMatchObject({ missing: ['b'], recreated: { b: 0 } });
    // More failures meanwhile: one recreation, no more questions.
    expect(await keeper.failed('b')).toBe(true);
    expect(calls).toBe(1);
    finish();
    await new Promise((r) => setImmediate(r));
    expect(keeper.view()).toEqual({ missing: [], recreated: { b: 1 } });
  });

  it('a recreation that fails is retried, and its error shown while the bucket is missing', async () => {
    let attempts = 0;
    keeper.keep('b', 'KV_b', () =>
      ++attempts < 3 ? Promise.reject(new Error('jetstream not ready')) : Promise.resolve(),
    );
    expect(await keeper.failed('b')).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(keeper.view()).toMatchObject({
      missing: ['b'],
      errors: { b: 'jetstream not ready' },
    });
    await waitFor(() => keeper.view().missing.length === 0, 5000, 20);
    expect(attempts).toBe(3);
    expect(keeper.view()).toEqual({ missing: [], recreated: { b: 1 } });
  });

  it('an unknown bucket, or a stopped keeper, reports nothing gone', async () => {
    expect(await keeper.failed('nope')).toBe(false);
    keeper.keep('b', 'KV_b', () => Promise.resolve());
    keeper.onApplicationShutdown();
    expect(await keeper.failed('b')).toBe(false);
  });

  it('open retries a bucket that cannot be opened yet, and refuses one whose settings conflict, once for all', async () => {
    const logger = new Logger('test');
    jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
    jest.spyOn(logger, 'error').mockImplementation(() => undefined);
    let tries = 0;
    const opened = await keeper.open(
      'b',
      () => (++tries < 2 ? Promise.reject(new Error('no responders')) : Promise.resolve('kv')),
      logger,
    );
    expect({ opened, tries }).toEqual({ opened: 'kv', tries: 2 });
    const refused = keeper.refused();
    const conflict = new StoreConfigError('bucket c exists with other settings');
    expect(await keeper.open('c', () => Promise.reject(conflict), logger)).toBeUndefined();
    // A second conflict does not replace the first: main.ts reports one and exits 78.
    keeper.refuse(new StoreConfigError('bucket d exists with other settings'));
    await expect(refused).resolves.toBe(conflict);
    await expect(keeper.refused()).resolves.toBe(conflict);
  });
});
