import type { Subscription } from '@nats-io/transport-node';
import { OverloadGate, sheddable } from './overload-gate';
import { QueueGroupMembership, type StepOut } from './queue-group-membership';

/** A subscription that records its drain. */
function fakeSub(log: string[], name: string): Subscription {
  return {
    drain: () => {
      log.push(`drain ${name}`);
      return Promise.resolve();
    },
  } as unknown as Subscription;
}

describe('QueueGroupMembership', () => {
  afterEach(() => jest.useRealTimers());
  let now = 0;
  const clock = () => now;

  it('subscribes at once, drains every member on leave, and subscribes afresh on rejoin', () => {
    const log: string[] = [];
    const m = new QueueGroupMembership(10_000, clock);
    m.stepOutWhen(() => true);
    let n = 0;
    for (const name of ['wait_metadata', 'send']) {
      m.add(() => {
        log.push(`subscribe ${name}`);
        return fakeSub(log, `${name}#${n++}`);
      });
    }
    expect(log).toEqual(['subscribe wait_metadata', 'subscribe send']);
    now = 100;
    m.leave();
    m.leave(); // already out: nothing more
    expect(log.slice(2)).toEqual(['drain wait_metadata#0', 'drain send#1']);
    expect(m.out).toBe(true);
    now = 130;
    expect(m.stats).toEqual({ out: true, stepOuts: 1, outMs: 30, stayedIn: 0 });
    now = 150;
    m.rejoin();
    m.rejoin(); // already in: nothing more
    expect(log.slice(4)).toEqual(['subscribe wait_metadata', 'subscribe send']);
    expect(m.stats).toEqual({ out: false, stepOuts: 1, outMs: 50, stayedIn: 0 });
    expect(m.out).toBe(false);
    // The new subscriptions are the ones drained next time.
    m.leave();
    expect(log.slice(6)).toEqual(['drain wait_metadata#2', 'drain send#3']);
    m.rejoin();
  });

  it('rejoins by itself after maxOutMs, and never once closed', () => {
    jest.useFakeTimers();
    const log: string[] = [];
    const m = new QueueGroupMembership(5, clock);
    m.stepOutWhen(() => true);
    m.add(() => {
      log.push('subscribe');
      return fakeSub(log, 's');
    });
    m.leave();
    jest.advanceTimersByTime(4);
    expect(m.out).toBe(true);
    jest.advanceTimersByTime(1);
    expect(m.out).toBe(false);
    expect(log).toEqual(['subscribe', 'drain s', 'subscribe']);
    m.leave();
    m.close();
    jest.advanceTimersByTime(30);
    m.rejoin();
    expect(log).toEqual(['subscribe', 'drain s', 'subscribe', 'drain s']); // no resubscribe
    m.leave(); // closed: stays as it is
    expect(m.stats.stepOuts).toBe(2);
  });

  it('has nothing to leave without members (only release, which is never withdrawn)', () => {
    expect(sheddable('release')).toBe(false);
    expect(sheddable('publish_metadata')).toBe(false);
    expect(sheddable('wait_metadata')).toBe(true);
    const m = new QueueGroupMembership(5, clock);
    m.stepOutWhen(() => true);
    m.leave();
    expect(m.stats).toEqual({ out: false, stepOuts: 0, outMs: 0, stayedIn: 0 });
  });

  it('never steps out as the last member: until another is known to stay in, it stays and counts it', () => {
    const log: string[] = [];
    const m = new QueueGroupMembership(10_000, clock);
    m.add(() => fakeSub(log, 'wait_metadata'));
    m.leave(); // nobody said another member stays in: a lone instance
    expect(m.out).toBe(false);
    expect(log).toEqual([]);
    let others = false;
    m.stepOutWhen(() => others);
    m.leave();
    expect(m.stats).toMatchObject({ out: false, stepOuts: 0, stayedIn: 2 });
    others = true;
    m.leave();
    expect(m.stats).toMatchObject({ out: true, stepOuts: 1, stayedIn: 2 });
    expect(log).toEqual(['drain wait_metadata']);
    m.close();
  });
});

describe('OverloadGate with a step-out', () => {
  let now = 0;
  const clock = () => now;
  const tick = () => new Promise((r) => setImmediate(r));
  const call = (reply = '_INBOX.1') =>
    ({ reply, string: () => '{"req_id":"r"}', respond: () => true }) as never;

  function recorder(): StepOut & { log: string[] } {
    const log: string[] = [];
    const s = {
      out: false,
      log,
      leave() {
        if (s.out) return;
        s.out = true;
        log.push('leave');
      },
      rejoin() {
        if (!s.out) return;
        s.out = false;
        log.push('rejoin');
      },
    };
    return s;
  }

  it('steps out when the queue holds half the bound, and back in once it has drained', async () => {
    const gate = new OverloadGate(100, 1000, clock, clock);
    const step = recorder();
    gate.stepOut = step;
    const handled: number[] = [];
    const h = gate.wrap('wait_metadata', () => handled.push(now));
    now = 1000;
    h(null, call()); // at once
    h(null, call()); // queued: waited 0 ms
    expect(step.log).toEqual([]);
    now = 1040;
    h(null, call()); // the oldest has waited 40 ms: under half the bound
    expect(step.log).toEqual([]);
    now = 1060;
    h(null, call()); // 60 ms: over half
    expect(step.log).toEqual(['leave']);
    expect(gate.stats.shed).toEqual({}); // nothing refused: it still had room
    await tick();
    expect(handled).toHaveLength(4);
    expect(step.log).toEqual(['leave', 'rejoin']);
    expect(gate.stats.queued).toBe(0);
  });

  it('steps out on the first call shed, too', () => {
    const gate = new OverloadGate(100, 2, clock, clock);
    const step = recorder();
    gate.stepOut = step;
    const h = gate.wrap('wait_metadata', () => undefined);
    now = 5000;
    h(null, call());
    h(null, call());
    h(null, call()); // two queued: the bound by count
    expect(step.log).toEqual([]);
    h(null, call()); // shed
    expect(gate.stats.shed).toEqual({ wait_metadata: 1 });
    expect(step.log).toEqual(['leave']);
  });
});
