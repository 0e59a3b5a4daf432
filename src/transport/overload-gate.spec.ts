import type { Msg } from '@nats-io/transport-node';
import { OverloadGate } from './overload-gate';

/** A received NATS message that records what it was answered. */
function msg(body: string, reply = '_INBOX.1'): Msg & { answers: string[] } {
  const answers: string[] = [];
  return {
    reply,
    data: Buffer.from(body),
    string: () => body,
    respond: (data: string) => {
      answers.push(data);
      return true;
    },
    answers,
  } as unknown as Msg & { answers: string[] };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('OverloadGate', () => {
  let now = 0;
  const clock = () => now;

  it('passes every call through in order when nothing waits, and drains to zero', async () => {
    const gate = new OverloadGate(100, 1000, clock, clock);
    const seen: string[] = [];
    const h = gate.wrap('wait_metadata', (_e, m) => seen.push(m.string()));
    for (let i = 0; i < 5; i++) h(null, msg(`{"req_id":"r${i}"}`));
    await tick();
    expect(seen).toEqual([0, 1, 2, 3, 4].map((i) => `{"req_id":"r${i}"}`));
    expect(gate.stats).toMatchObject({ queued: 0, handled: 5, shed: {} });
  });

  it('answers 503 overloaded at once when the oldest queued call has waited too long', async () => {
    const gate = new OverloadGate(100, 1000, clock, clock);
    const handled: string[] = [];
    const h = gate.wrap('wait_metadata', (_e, m) => handled.push(m.string()));
    now = 1000;
    h(null, msg('{"req_id":"first"}')); // nothing ahead of it: handled at once
    h(null, msg('{"req_id":"second"}')); // behind it in the same turn: queued
    now = 1200; // the queued call has waited 200 ms (the drain has not run)
    const bare = msg('{"req_id":"a \\"quoted\\" id","part_idx":0}');
    const envelope = msg('{"pattern":"wait_metadata","data":{"req_id":"r2"},"id":"nest-7"}');
    h(null, bare);
    h(null, envelope);
    expect(JSON.parse(bare.answers[0]!)).toEqual({
      id: 'epd-bare-shed',
      err: {
        status: 'error',
        code: 503,
        type: 'overloaded',
        message: 'encoder overloaded; retry after 200 ms',
        req_id: 'a "quoted" id',
      },
    });
    expect(JSON.parse(envelope.answers[0]!)).toMatchObject({
      id: 'nest-7',
      isDisposed: true,
      err: { code: 503, type: 'overloaded', req_id: 'r2' },
    });
    await tick();
    expect(handled).toEqual(['{"req_id":"first"}', '{"req_id":"second"}']);
    expect(gate.stats).toMatchObject({ queued: 0, shed: { wait_metadata: 2 } });
  });

  it('never sheds release, events without a reply subject, or anything when off', async () => {
    const gate = new OverloadGate(100, 1000, clock, clock);
    const off = new OverloadGate(0, 1000, clock, clock);
    let handled = 0;
    const release = gate.wrap('release', () => handled++);
    const wait = gate.wrap('wait_metadata', () => handled++);
    now = 0;
    wait(null, msg('{}'));
    now = 500;
    release(null, msg('{"req_id":"x"}'));
    wait(null, msg('{}', ''));
    const plain = () => handled++;
    expect(off.wrap('wait_metadata', plain)).toBe(plain);
    await tick();
    expect(handled).toBe(3);
    expect(gate.stats.shed).toEqual({});
  });

  it('bounds the queue by count, whatever the age', async () => {
    const gate = new OverloadGate(10_000, 3, clock, clock);
    const h = gate.wrap('send', () => undefined);
    // One handled at once, three queued, two shed.
    const msgs = Array.from({ length: 5 }, () => msg('not json'));
    // A req_id whose escape is not JSON: shed all the same, never a throw in the callback.
    msgs.push(msg('{"req_id":"bad \\x escape"}'));
    for (const m of msgs) h(null, m);
    expect(msgs.filter((m) => m.answers.length === 1)).toHaveLength(2);
    // Not JSON: shed all the same, with no req_id to echo.
    expect(JSON.parse(msgs[5]!.answers[0]!)).toMatchObject({ err: { req_id: null } });
    await tick();
    expect(gate.stats.queued).toBe(0);
  });

  it('echoes ids as written when plainly valid, decodes escapes, and gives null for invalid JSON', () => {
    const gate = new OverloadGate(100, 1, clock, clock);
    const h = gate.wrap('wait_metadata', () => undefined);
    h(null, msg('{}')); // handled at once
    h(null, msg('{}')); // queued: the queue is now full, so the next calls are shed
    const cases = {
      plain: ['{"req_id":"émoji 🫰 id"}', 'émoji 🫰 id'],
      escaped: ['{"req_id":"tab\\there \\u00e9"}', 'tab\there é'],
      control: ['{"req_id":"raw \u0001 control"}', null],
    } as const;
    for (const [body, expected] of Object.values(cases)) {
      const m = msg(body);
      h(null, m);
      expect(JSON.parse(m.answers[0]!)).toMatchObject({ err: { code: 503, req_id: expected } });
    }
  });

  it('never sheds a publish or a release, however deep the queue', async () => {
    const gate = new OverloadGate(100, 1000, clock, clock);
    const handled: string[] = [];
    const wait = gate.wrap('wait_metadata', (_e, m) => handled.push(m.string()));
    const publish = gate.wrap('publish_metadata', (_e, m) => handled.push(m.string()));
    now = 10_000;
    wait(null, msg('{"req_id":"a"}'));
    wait(null, msg('{"req_id":"b"}'));
    now = 20_000; // the queued wait has waited 10 s
    const p = msg('{"req_id":"b","metadata":{"error":"x"}}');
    publish(null, p);
    const w = msg('{"req_id":"c"}');
    wait(null, w);
    expect(p.answers).toEqual([]);
    expect(JSON.parse(w.answers[0]!)).toMatchObject({ err: { type: 'overloaded' } });
    await tick();
    expect(handled).toHaveLength(3);
    expect(gate.stats.shed).toEqual({ wait_metadata: 1 });
  });

  it('queues a call past EPD_OVERLOAD_QUEUE_MS while it is within half its own declared budget (at most 8x the bound)', async () => {
    const gate = new OverloadGate(100, 100_000, clock, clock);
    const handled: string[] = [];
    const h = gate.wrap('wait_metadata', (_e, m) => handled.push(m.string()));
    now = 50_000;
    h(null, msg('{"req_id":"first"}'));
    h(null, msg('{"req_id":"queued"}'));
    now = 50_300; // the oldest queued has waited 300 ms: 3x the bound
    const long = msg('{"req_id":"long","timeout_ms":15000}'); // may wait min(7.5 s, 800 ms)
    const short = msg('{"req_id":"short","timeout_ms":1000}'); // may wait 500 ms
    const none = msg('{"req_id":"none"}'); // declares nothing: the bound
    h(null, long);
    h(null, short);
    h(null, none);
    expect(long.answers).toEqual([]);
    expect(short.answers).toEqual([]);
    expect(JSON.parse(none.answers[0]!)).toMatchObject({ err: { type: 'overloaded' } });
    now = 50_700; // 700 ms: past the 1 s caller's half, within the 15 s caller's cap
    const short2 = msg('{"req_id":"short2","timeout_ms":1000}');
    const long2 = msg('{"req_id":"long2","timeout_ms":15000}');
    h(null, short2);
    h(null, long2);
    expect(JSON.parse(short2.answers[0]!)).toMatchObject({ err: { type: 'overloaded' } });
    expect(long2.answers).toEqual([]);
    now = 51_000; // 1 s: past the cap of 8 x 100 ms, whatever it declares
    const long3 = msg('{"req_id":"long3","timeout_ms":15000}');
    h(null, long3);
    expect(JSON.parse(long3.answers[0]!)).toMatchObject({ err: { type: 'overloaded' } });
    // The Deadline header (epoch ms) is a declared budget too.
    now = 50_700;
    const headed = Object.assign(msg('{"req_id":"headed"}'), {
      headers: { get: (k: string) => (k === 'Deadline' ? String(now + 10_000) : '') },
    });
    h(null, headed);
    expect(headed.answers).toEqual([]);
    await tick();
    expect(gate.stats.queued).toBe(0);
    expect(handled).toEqual([
      '{"req_id":"first"}',
      '{"req_id":"queued"}',
      '{"req_id":"long","timeout_ms":15000}',
      '{"req_id":"short","timeout_ms":1000}',
      '{"req_id":"long2","timeout_ms":15000}',
      '{"req_id":"headed"}',
    ]);
  });

  describe('shedding in the queue group (EPD_OVERLOAD_SHEDDING_QUEUE_MS)', () => {
    const shedType = (m: { answers: unknown[] }) =>
      m.answers.length
        ? (JSON.parse(String(m.answers[0])) as { err?: { type: string } }).err?.type
        : undefined;

    it('keeps only a few ms queued once it has shed, whatever a call declares, and the bound again after a quiet spell', async () => {
      const gate = new OverloadGate(100, 10_000, clock, clock, 10);
      const handled: string[] = [];
      const h = gate.wrap('wait_metadata', (_e, m) => handled.push(m.string()));
      now = 1000;
      h(null, msg('{"req_id":"first"}'));
      h(null, msg('{"req_id":"queued"}'));
      now = 1200; // the queued call has waited 200 ms: past the 100 ms bound
      const over = msg('{"req_id":"over"}');
      h(null, over);
      expect(shedType(over)).toBe('overloaded');
      expect(gate.stats).toMatchObject({ shedding: true, sheddingSpells: 1 });
      // A call that declares 15 s may wait 800 ms in a burst; while shedding, 10 ms.
      const long = msg('{"req_id":"long","timeout_ms":15000}');
      h(null, long);
      expect(shedType(long)).toBe('overloaded');
      await tick();
      now = 1250; // 50 ms after the last shed: still shedding
      h(null, msg('{"req_id":"a"}'));
      h(null, msg('{"req_id":"b"}'));
      now = 1265; // b has waited 15 ms
      const c = msg('{"req_id":"c","timeout_ms":15000}');
      h(null, c);
      expect(shedType(c)).toBe('overloaded');
      expect(gate.stats.sheddingSpells).toBe(1); // the same spell
      await tick();
      now = 1400; // 135 ms without a shed: a burst again may queue up to its budget
      expect(gate.stats.shedding).toBe(false);
      h(null, msg('{"req_id":"d"}'));
      h(null, msg('{"req_id":"e"}'));
      now = 1450;
      const f = msg('{"req_id":"f","timeout_ms":15000}');
      h(null, f);
      expect(f.answers).toEqual([]);
      await tick();
      expect(gate.stats).toMatchObject({ queued: 0, shedding: false, sheddingSpells: 1 });
      expect(handled).toEqual(
        ['first', 'queued', 'a', 'b', 'd', 'e', 'f'].map(
          (r) => `{"req_id":"${r}"${r === 'f' ? ',"timeout_ms":15000' : ''}}`,
        ),
      );
    });

    it('never begins on a burst of calls that declare long budgets (none is shed)', async () => {
      const gate = new OverloadGate(100, 10_000, clock, clock, 10);
      let handled = 0;
      const h = gate.wrap('wait_metadata', () => handled++);
      now = 5000;
      const burst = Array.from({ length: 50 }, (_, i) =>
        msg(`{"req_id":"w${i}","timeout_ms":15000}`),
      );
      for (const m of burst.slice(0, 25)) h(null, m);
      now = 5300; // queued for 300 ms: within the 800 ms a 15 s caller may wait
      for (const m of burst.slice(25)) h(null, m);
      await tick();
      expect(burst.every((m) => m.answers.length === 0)).toBe(true);
      expect(handled).toBe(50);
      expect(gate.stats).toMatchObject({ shedding: false, sheddingSpells: 0, shed: {} });
    });

    it('does not keep the short queue while it is out of the queue group, nor when off', () => {
      const out = new OverloadGate(100, 10_000, clock, clock, 10);
      const membership = {
        out: false,
        leave: () => void (membership.out = true),
        rejoin: () => void (membership.out = false),
      };
      out.stepOut = membership;
      const off = new OverloadGate(100, 10_000, clock, clock, 0);
      for (const gate of [out, off]) {
        const h = gate.wrap('wait_metadata', () => undefined);
        now = 9000;
        h(null, msg('{"req_id":"first"}'));
        h(null, msg('{"req_id":"queued"}'));
        now = 9200;
        const over = msg('{"req_id":"over"}');
        h(null, over);
        expect(shedType(over)).toBe('overloaded');
        expect(gate.stats).toMatchObject({ shedding: false, sheddingSpells: 0 });
      }
    });
  });
});
