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

  describe('several models: each holds at most its share (EPD_MODEL_WORK_SHARE)', () => {
    const shared = () => new WorkBudget(100, () => clock.now(), ['a', 'b'], 0.75);

    it("a flood of one model's parts leaves room for another model's, which may pass its waiters", async () => {
      const budget = shared();
      const a1 = budget.lease('a1', 'a');
      await a1.reserve(70, Date.now() + 5000);
      // a's next part would overflow a's share (75): it waits, though the budget has 30 free.
      const a2 = budget.lease('a2', 'a');
      const order: string[] = [];
      const pa2 = a2.reserve(10, Date.now() + 5000).then(() => order.push('a2'));
      // b's part, behind it, fits b's share and the budget: it goes in at once.
      const b1 = budget.lease('b1', 'b');
      await b1.reserve(20, Date.now() + 5000);
      order.push('b1');
      expect(budget.stats()).toMatchObject({
        in_use_bytes: 90,
        waiting: 1,
        model_share_bytes: 75,
        per_model: { a: 70, b: 20 },
      });
      a1.release();
      await pa2;
      expect(order).toEqual(['b1', 'a2']);
      a2.release();
      b1.release();
      expect(budget.stats()).toMatchObject({
        in_use_bytes: 0,
        waiting: 0,
        per_model: { a: 0, b: 0 },
      });
    });

    it('names the model when its share is busy (503) or too small (507); a lease of no model or an unserved one counts for the budget only', async () => {
      const budget = shared();
      const a1 = budget.lease('a1', 'a');
      a1.charge(70);
      let busy: unknown;
      try {
        budget.lease('a2', 'a').charge(10);
      } catch (err) {
        busy = err;
      }
      expect((busy as MMError).code).toBe(503);
      expect((busy as MMError).message).toBe(
        'working memory busy for model "a": need 10 bytes, its requests hold 70 of its share of 75 (EPD_MODEL_WORK_SHARE of EPD_WORK_MAX_BYTES); retry later',
      );
      const big = budget.lease('big', 'b');
      const err = await big.reserve(80, Date.now() + 5000).catch((e: unknown) => e as MMError);
      expect((err as MMError).code).toBe(507);
      expect((err as MMError).message).toContain('more than model "b"\'s share of 75');
      const body = budget.lease();
      body.charge(20);
      const stray = budget.lease('x', 'not-served');
      expect(stray.model).toBeUndefined();
      expect(budget.stats()).toMatchObject({ in_use_bytes: 90, per_model: { a: 70, b: 0 } });
      a1.release();
      body.release();
      expect(budget.stats()).toMatchObject({
        in_use_bytes: 0,
        waiting: 0,
        refused: { busy: 1, too_large: 1 },
      });
    });

    it("a model whose share is filled by its own waiters' loaded bytes lets its first waiter in (no deadlock)", async () => {
      const budget = shared();
      const leases = [1, 2].map((i) => budget.lease(`a${i}`, 'a'));
      leases[0]!.charge(40);
      leases[1]!.charge(35);
      // Both hold their loads (75, the share) and want room for their parts.
      const p1 = leases[0]!.reserve(5, Date.now() + 5000);
      const p2 = leases[1]!.reserve(5, Date.now() + 5000);
      await p1;
      leases[0]!.release();
      await p2;
      leases[1]!.release();
      expect(budget.stats()).toMatchObject({
        in_use_bytes: 0,
        waiting: 0,
        per_model: { a: 0, b: 0 },
      });
    });

    it('with one model there is no share', () => {
      const budget = new WorkBudget(100, () => clock.now(), ['a'], 0.5);
      budget.lease('a1', 'a').charge(90);
      expect(budget.stats().per_model).toBeUndefined();
    });
  });
});
