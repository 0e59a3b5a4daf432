import { Clock } from '../common/clock';
import { Readiness } from '../common/readiness';
import { FirstStarts } from './first-starts';

const flush = () => new Promise((r) => setImmediate(r));

describe('FirstStarts', () => {
  it('waits for every rank, saying what each reported, and a failed rank ends its own wait', async () => {
    const readiness = new Readiness(new Clock());
    const starts = new FirstStarts(3, readiness);
    let ready = false;
    void readiness.whenReady().then(() => (ready = true));
    expect(readiness.waitingFor).toEqual({
      'DP workers': 'rank 0: starting; rank 1: starting; rank 2: starting',
    });
    starts.waiting(1, { pid: 11, waiting_for: { model: 'pending' }, failed: null });
    expect(readiness.waitingFor['DP workers']).toBe(
      'rank 0: starting; rank 1 (pid 11): model: pending; rank 2: starting',
    );
    starts.ended(0); // came up
    starts.waiting(1, { pid: 11, waiting_for: { model: 'bad file' }, failed: 'model: bad file' });
    expect(starts.notReady(1)).toEqual({ model: 'bad file' });
    await flush();
    expect(ready).toBe(false); // rank 2 has not started yet
    starts.ended(2); // died before it came up
    await flush();
    expect(ready).toBe(true);
    // A rank's report stays until its worker is replaced; then it is gone.
    expect(starts.notReady(1)).toEqual({ model: 'bad file' });
    starts.ended(1);
    expect(starts.notReady(1)).toBeNull();
  });
});
