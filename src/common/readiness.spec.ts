import { Clock } from './clock';
import { Readiness } from './readiness';

const flush = () => new Promise((r) => setImmediate(r));

describe('Readiness', () => {
  it('is not ready on a condition met before a later provider required its own', async () => {
    const readiness = new Readiness(new Clock());
    // The memory store opens at once, while Nest is still making the other providers.
    readiness.require('metadata store', Promise.resolve());
    await flush();
    let loaded!: () => void;
    readiness.require('model', new Promise<void>((r) => (loaded = r)));
    let ready = false;
    void readiness.whenReady().then(() => (ready = true));
    await flush();
    expect(ready).toBe(false);
    expect(readiness.ready).toBe(false);
    expect(readiness.waitingFor).toEqual({ model: 'pending' });
    loaded();
    await flush();
    expect(ready).toBe(true);
    expect(readiness.ready).toBe(true);
  });

  it('is ready at the first wait when every condition is already met, or none was required', async () => {
    const some = new Readiness(new Clock());
    some.require('metadata store', Promise.resolve());
    await flush();
    expect(some.ready).toBe(false); // nobody waited yet: the app is still initialising
    await expect(some.whenReady()).resolves.toBeUndefined();
    expect(some.ready).toBe(true);
    await expect(new Readiness(new Clock()).whenReady()).resolves.toBeUndefined();
  });

  it('names a failed condition and never turns ready', async () => {
    const readiness = new Readiness(new Clock());
    readiness.require('instance roster', Promise.reject(new Error('bucket gone')));
    let ready = false;
    void readiness.whenReady().then(() => (ready = true));
    await flush();
    expect(ready).toBe(false);
    expect(readiness.waitingFor).toEqual({ 'instance roster': 'bucket gone' });
  });

  it('says what a pending condition waits for, tells listeners each settle, and names the first failure', async () => {
    const readiness = new Readiness(new Clock());
    const settles: string[] = [];
    readiness.onChange(() => settles.push(JSON.stringify(readiness.waitingFor)));
    let opened!: () => void;
    let failLoad!: (err: Error) => void;
    readiness.require('metadata store', new Promise<void>((r) => (opened = r)), () => 'bucket x');
    readiness.require('model', new Promise<void>((_, reject) => (failLoad = reject)));
    void readiness.whenReady();
    expect(readiness.waitingFor).toEqual({ 'metadata store': 'bucket x', model: 'pending' });
    expect(readiness.failed).toBeNull();
    opened();
    await flush();
    failLoad(new Error('no such file'));
    await flush();
    expect(settles).toEqual(['{"model":"pending"}', '{"model":"no such file"}']);
    expect(readiness.failed).toBe('model: no such file');
    expect(readiness.ready).toBe(false);
  });
});
