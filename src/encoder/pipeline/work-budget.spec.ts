import { MMError } from '../../common/errors/mm-error';
import { WorkBudget } from './work-budget';
import { Clock } from '../../common/clock';

const clock = new Clock();

const settled = async (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'granted',
    (e: unknown) => (e instanceof MMError ? e.type : 'other'),
  );
const tick = () => new Promise((r) => setImmediate(r));

describe('WorkBudget (N2: one memory budget for the whole process)', () => {
  it('lets planned parts in while they fit, queues the rest in order, and drains to zero', async () => {
    const budget = new WorkBudget(100, () => clock.now());
    const [a, b, c] = ['a', 'b', 'c'].map((id) => budget.lease(id));
    await a!.reserve(60, Date.now() + 5000);
    const order: string[] = [];
    const pb = b!.reserve(50, Date.now() + 5000).then(() => order.push('b'));
    const pc = c!.reserve(10, Date.now() + 5000).then(() => order.push('c'));
    await tick();
    // c would fit, but b came first: no overtaking, so a large part is never starved.
    expect(order).toEqual([]);
    expect(budget.stats()).toMatchObject({ in_use_bytes: 60, waiting: 2, waiting_bytes: 60 });
    a!.release();
    await Promise.all([pb, pc]);
    expect(order).toEqual(['b', 'c']);
    expect(budget.stats()).toMatchObject({ in_use_bytes: 60, immediate: 1, waited: 2 });
    b!.release();
    c!.release();
    c!.release(); // idempotent
    expect(budget.stats()).toMatchObject({ in_use_bytes: 0, waiting: 0, waiting_bytes: 0 });
  });

  it('refuses a part larger than the whole budget at once (507 work_too_large)', async () => {
    const budget = new WorkBudget(100, () => clock.now());
    const lease = budget.lease('big');
    lease.charge(30); // its loaded bytes count toward its whole
    await expect(settled(lease.reserve(80, Date.now() + 5000))).resolves.toBe('work_too_large');
    lease.release();
    expect(budget.stats()).toMatchObject({ in_use_bytes: 0, refused: { too_large: 1 } });
  });

  it('ends a wait at the deadline with 503 memory_busy, naming the budget', async () => {
    const budget = new WorkBudget(100, () => clock.now());
    const holder = budget.lease('holder');
    await holder.reserve(90, Date.now() + 5000);
    const err = await budget
      .lease('late')
      .reserve(20, Date.now() + 30)
      .catch((e: unknown) => e as MMError);
    expect(err).toBeInstanceOf(MMError);
    expect((err as MMError).code).toBe(503);
    expect((err as MMError).message).toBe(
      'working memory busy: need 20 bytes, 10 of 100 free (EPD_WORK_MAX_BYTES); retry later',
    );
    holder.release();
    expect(budget.stats()).toMatchObject({ in_use_bytes: 0, waiting: 0, refused: { busy: 1 } });
  });

  it('refuses a load that would overflow at once, without waiting', () => {
    const budget = new WorkBudget(100, () => clock.now());
    const lease = budget.lease('load');
    lease.charge(70);
    expect(() => budget.lease('other').charge(40)).toThrow(/working memory busy/);
    lease.release();
    expect(budget.inUse).toBe(0);
  });

  it('lets the head in when only waiters hold bytes (their loads), instead of deadlocking', async () => {
    const budget = new WorkBudget(100, () => clock.now());
    const [a, b] = [budget.lease('a'), budget.lease('b')];
    a.charge(50);
    b.charge(40);
    // Neither plan fits beside the other's loaded bytes, and nothing else will free any.
    const pa = settled(a.reserve(30, Date.now() + 5000));
    const pb = settled(b.reserve(30, Date.now() + 5000));
    await expect(pa).resolves.toBe('granted');
    a.release();
    await expect(pb).resolves.toBe('granted');
    b.release();
    expect(budget.stats()).toMatchObject({ in_use_bytes: 0, waiting: 0 });
  });
});
