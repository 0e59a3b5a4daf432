import type { ChildProcess } from 'node:child_process';
import { LifecycleEvents } from '../common/lifecycle-events';
import { Clock } from '../common/clock';
import { Readiness } from '../common/readiness';
import { MMError } from '../common/errors/mm-error';
import { makeRegistry } from '../meta-registry/testing';
import { ReqStateStore } from '../requests/req-state.store';
import type { IpcChannel } from '../transport/ipc-channel';
import type { IpcCall } from '../transport/ipc-rpc.server';
import { DpDispatcher, mergeRankAnswers } from './dp-dispatcher.service';
import { WorkerClaims } from './worker-claims.providers';
import { threadPlan } from './thread-plan';
import { WorkerSupervisor } from './worker-supervisor.service';
import type { EncodeRequest } from '../encoder/encode-request.schema';

interface Call {
  rank: number;
  call: IpcCall;
  settle: (v: unknown) => void;
  fail: (e: Error) => void;
}

/** Each worker's IPC channel: calls stay pending until the test settles them. */
class FakeChannels {
  readonly calls: Call[] = [];
  for(rank: number): IpcChannel {
    return {
      request: (_type: string, call: IpcCall) =>
        new Promise((settle, fail) => this.calls.push({ rank, call, settle, fail })),
    } as unknown as IpcChannel;
  }
}

function setup(maxPending = 2, env: Record<string, string> = {}) {
  const { registry, config, store } = makeRegistry({
    ...env,
    EPD_DP_SIZE: '2',
    EPD_MAX_PENDING: String(maxPending),
    EPD_INSTANCE_ID: 'inst',
    EPD_SUBJECT_PREFIX: 'p',
  });
  const clock = new Clock();
  const supervisor = new WorkerSupervisor(
    config,
    registry,
    clock,
    store,
    new WorkerClaims(),
    new Readiness(clock),
  );
  const forwarder = new FakeChannels();
  for (const r of supervisor.ranks) {
    r.child = {} as ChildProcess;
    r.pid = 100 + r.rank;
    r.ready = true;
    r.channel = forwarder.for(r.rank);
  }
  const states = new ReqStateStore(config, clock, new LifecycleEvents());
  const dispatcher = new DpDispatcher(config, supervisor, registry, states, clock);
  const encode = (id: string) =>
    dispatcher.encode(
      { req_id: id },
      { req_id: id, part_idx: 0 } as EncodeRequest,
      Date.now() + 5000,
    );
  const rankOf = (i: number) => forwarder.calls[i]!.rank;
  return { supervisor, forwarder, dispatcher, states, registry, encode, rankOf };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('DpDispatcher', () => {
  it('rotates ties with one global cursor, never reset between requests', async () => {
    const { forwarder, encode, rankOf } = setup();
    for (let i = 0; i < 4; i++) {
      const p = encode(`r${i}`);
      await flush();
      forwarder.calls[i]!.settle({ req_id: `r${i}` });
      await p;
    }
    expect([0, 1, 2, 3].map(rankOf)).toEqual([0, 1, 0, 1]);
  });

  it('sends an encode to the rank with the fewest pending calls', async () => {
    const { forwarder, encode, rankOf, supervisor } = setup(8);
    const a = encode('a');
    await flush();
    const busy = rankOf(0);
    // Control calls count as pending too.
    supervisor.ranks[busy]!.pending += 1;
    for (const id of ['b', 'c']) {
      void encode(id);
      await flush();
    }
    expect([rankOf(1), rankOf(2)]).toEqual([1 - busy, 1 - busy]);
    supervisor.ranks[busy]!.pending -= 1;
    forwarder.calls[0]!.settle({});
    await a;
  });

  it('skips a saturated rank, and names EPD_MAX_PENDING when every rank is full', async () => {
    const { encode } = setup(1);
    void encode('a');
    void encode('b');
    await flush();
    await expect(encode('c')).rejects.toMatchObject({
      code: 503,
      type: 'at_capacity',
      message: expect.stringMatching(/all 2 encoder DP workers .*EPD_MAX_PENDING=1/),
    });
  });

  it('answers 409 for a req_id already being dispatched, whichever rank has it', async () => {
    const { encode, forwarder } = setup();
    const first = encode('dup');
    await flush();
    await expect(encode('dup')).rejects.toMatchObject({ code: 409, type: 'duplicate_request' });
    expect(forwarder.calls).toHaveLength(1);
    forwarder.calls[0]!.settle({});
    await first;
  });

  it('answers "All encoder DP workers are dead." when no rank is alive', async () => {
    const { encode, supervisor } = setup();
    for (const r of supervisor.ranks) r.ready = false;
    await expect(encode('x')).rejects.toMatchObject({
      code: 503,
      message: 'All encoder DP workers are dead.',
    });
  });

  it('fails a dead worker’s pending calls at once, and publishes the reason for the waiters', async () => {
    const { encode, supervisor, registry, dispatcher } = setup();
    const p = encode('victim');
    await flush();
    const rank = supervisor.ranks.find((r) => r.pending === 1)!;
    expect(dispatcher.inflightOwner('victim')).toMatchObject({ rank: rank.rank, pid: rank.pid });
    for (const fail of [...rank.failers]) fail(-9);
    await expect(p).rejects.toMatchObject({
      code: 503,
      type: 'worker_died',
      message: `DP worker rank=${rank.rank} died (exitcode=-9)`,
    });
    expect(rank.pending).toBe(0);
    expect(dispatcher.inflightCount).toBe(0);
    expect((await registry.get('victim'))?.metadata).toEqual({
      error: `DP worker rank=${rank.rank} died (exitcode=-9)`,
    });
  });

  it('routes a call to its owner rank only while that worker process lives', async () => {
    const { dispatcher, supervisor, forwarder } = setup();
    const call = dispatcher.call(
      { instance: 'inst', rank: 1, pid: 101 },
      'send',
      'r',
      {},
      Date.now() + 1000,
    );
    await flush();
    expect(forwarder.calls[0]).toMatchObject({ rank: 1, call: { pattern: 'send', data: {} } });
    forwarder.calls[0]!.settle({ ok: 1 });
    await expect(call).resolves.toEqual({ ok: 1 });
    supervisor.ranks[1]!.pid = 202; // respawned: a new process without the embedding
    await expect(
      dispatcher.call({ instance: 'inst', rank: 1, pid: 101 }, 'send', 'r', {}, Date.now() + 1000),
    ).rejects.toMatchObject({
      code: 503,
      type: 'embedding_lost',
      message:
        'staged embedding for req_id=r was lost (encoder restarted: DP worker rank=1 (pid 101) is gone)',
    });
  });

  it('presents the shared admin token to the workers, whose guards check it too', async () => {
    const { dispatcher, forwarder } = setup(2, {
      EPD_ADMIN_TOKEN: 'sesame-0123456789abcdef0123456789abcdef',
    });
    const answers = dispatcher.broadcast('start_profile', {}, 1000);
    await flush();
    expect(forwarder.calls.map((c) => c.call.authorization)).toEqual([
      'Bearer sesame-0123456789abcdef0123456789abcdef',
      'Bearer sesame-0123456789abcdef0123456789abcdef',
    ]);
    for (const c of forwarder.calls) c.settle({ ok: true, msg: 'Start profiling.' });
    expect((await answers).map((a) => a.rank)).toEqual([0, 1]);
  });

  it('refuses an encode released before it began, and tells its waiters', async () => {
    const { dispatcher, states, registry } = setup();
    states.release('early');
    await expect(
      dispatcher.encode({}, { req_id: 'early', part_idx: 0 } as EncodeRequest, Date.now() + 1000),
    ).rejects.toMatchObject({ code: 409, type: 'released' });
    expect((await registry.get('early'))?.metadata).toMatchObject({ error: expect.any(String) });
  });
});

describe('mergeRankAnswers', () => {
  it('joins one line per rank', () => {
    expect(
      mergeRankAnswers(
        [
          { rank: 0, value: 'a' },
          { rank: 1, value: 'b' },
        ],
        (v) => `ok ${v}`,
      ),
    ).toBe('dp_rank=0: ok a\ndp_rank=1: ok b');
  });

  it('fails with the worst per-rank status, every line kept', () => {
    let err: MMError | undefined;
    try {
      mergeRankAnswers(
        [
          { rank: 0, error: new MMError('profiling already running', 400) },
          { rank: 1, value: 'x' },
          { rank: 2, error: new MMError('health_encode timed out', 504) },
        ],
        (v) => v,
      );
    } catch (e) {
      err = e as MMError;
    }
    expect(err?.code).toBe(504);
    expect(err?.message).toBe(
      'dp_rank=0: 400 profiling already running\ndp_rank=1: x\ndp_rank=2: 504 health_encode timed out',
    );
  });
});

describe('threadPlan', () => {
  it('shares the cores between the workers, at least one thread each', () => {
    expect(threadPlan(2, 8, {})).toMatchObject({ intraOpThreads: 4, preprocessThreads: 1 });
    expect(threadPlan(2, 2, {})).toMatchObject({ intraOpThreads: 1, preprocessThreads: 1 });
    expect(threadPlan(4, 2, {})).toMatchObject({ intraOpThreads: 1 });
  });

  it('keeps what the operator set', () => {
    expect(
      threadPlan(2, 8, { EPD_INTRA_OP_THREADS: '3', EPD_PREPROCESS_THREADS: '2' }),
    ).toMatchObject({
      intraOpThreads: 3,
      preprocessThreads: 2,
      explicit: { intraOpThreads: true, preprocessThreads: true },
    });
  });
});

describe('WorkerSupervisor.ask', () => {
  it('answers with every rank that answered, and names each one left out and why', async () => {
    const { supervisor } = setup();
    const [r0, r1] = supervisor.ranks;
    r0!.channel = {
      request: () => Promise.resolve({ batches: 3 }),
    } as unknown as IpcChannel;
    r1!.channel = {
      request: () => Promise.reject(new Error('IPC scheduler got no answer within 1000 ms')),
    } as unknown as IpcChannel;
    expect(await supervisor.ask('scheduler')).toEqual({
      answers: [{ rank: 0, value: { batches: 3 } }],
      missing: [{ dp_rank: 1, reason: 'IPC scheduler got no answer within 1000 ms' }],
    });
    r1!.ready = false; // dead, or not started yet
    expect((await supervisor.ask('scheduler')).missing).toEqual([
      { dp_rank: 1, reason: 'not alive' },
    ]);
    expect(await supervisor.gather('scheduler')).toEqual([{ rank: 0, value: { batches: 3 } }]);
  });
});
