/**
 * Overload: wait_metadata over NATS for published entries, offered open-loop (a fixed
 * arrival rate, whatever the service answers) at 2× the rate the service sustains,
 * measured in this same run with a closed loop at 256 in flight. Every call has a 1 s
 * deadline (`timeout_ms` and the client's own timeout). Reported: calls answered ok,
 * answered 503 `overloaded`, never answered (client timeout), the ok rate against the
 * sustainable rate, and the latency of the answered. Run five times: the service as
 * configured (a lone instance sheds and never steps out), shedding without stepping out,
 * shedding off (EPD_OVERLOAD_QUEUE_MS=0: the behaviour before shedding existed), the
 * default launched without SERVICE_NODE_FLAGS, and two instances where one may step out.
 */
import { setPriority } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsServer } from '../test/support/nats-server';
import {
  QUICK,
  machine,
  mainThreadSched,
  median,
  publishBenchEntries,
  round,
  runBench,
  serviceGc,
  summarize,
  writeReport,
} from './common';
import {
  setProcessPriority,
  startRawResponder,
  startService,
  stopProcess,
} from './service-process';
import { SERVICE_NODE_FLAGS } from '../src/common/node-flags';

const ENTRIES = QUICK ? 200 : 1000;
const INFLIGHT = 256;
const DEADLINE_MS = 1000;
/**
 * Rounds of (sustainable rate, closed loop; then 2× that rate, open loop, for SECONDS):
 * each 2× block is set by, and compared with, the rate measured just before it. This
 * machine's speed drifts by tens of percent within a minute (sustainable rates of 34k-47k/s
 * in consecutive runs), and one measurement taken before 15 s of load made the ratio
 * mostly that drift: the ok rate at 2× was steady (33.4-33.8k/s in four runs) while the
 * ratio swung 0.75-0.88 with the denominator.
 */
const ROUNDS = QUICK ? 1 : 3;
const SECONDS = QUICK ? 1 : 5;
const TICK_MS = 5;
/** A generator whose own loop is delayed more than this no longer times replies fairly. */
const GENERATOR_LAG_OK_MS = 100;
const META = { embedding_size: 4 * 1024 * 1176, embedding_len: 1176, embedding_dim: 1024 };
/** Call i's body, encoded once per entry (not per call: the generator must stay cheap). */
const BODIES = Array.from({ length: ENTRIES }, (_, k) =>
  Buffer.from(JSON.stringify({ req_id: `bench-${k}`, part_idx: 0, timeout_ms: DEADLINE_MS })),
);
const body = (i: number) => BODIES[i % ENTRIES]!;

/**
 * A load generator as cheap as nats.js allows, so that it does not saturate before the
 * service does: one wildcard inbox for every reply, the call's number in its reply
 * subject, bodies encoded once, no timer or promise per call, replies classified from
 * their bytes without decoding or parsing them.
 */
class Generator {
  private readonly inbox = `_GEN.${Math.random().toString(36).slice(2)}`;
  // Typed columns, not arrays of numbers: millions of calls are recorded, and the
  // generator's own garbage collection delayed its loop.
  private readonly sentAt = new Column(Float64Array);
  private readonly answeredAt = new Column(Float64Array);
  private readonly kind = new Column(Uint8Array); // 1 ok, 2 overloaded, 3 other error, 4 no responders
  private sent = 0;
  private onReply?: () => void;
  private replies = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
  ) {
    nc.subscribe(`${this.inbox}.*`, {
      callback: (_err, msg) => {
        const i = Number(msg.subject.slice(this.inbox.length + 1));
        this.answeredAt.set(i, performance.now());
        // The NATS server's own 503 (no subscriber took the call): the service is out of
        // the queue group while it sheds (EPD_OVERLOAD_STEP_OUT). Its payload is empty,
        // the service's never is. Parsing its headers cost the generator enough to fall
        // behind at 2× (nats.js decodes them on first access), so they are checked on
        // one reply in 1024 only.
        if (msg.data.length === 0) {
          if (i % 1024 === 0 && msg.headers?.code !== 503)
            throw new Error(`an empty reply that is not NATS's 503: ${msg.headers?.code}`);
          this.kind.set(i, 4);
        } else {
          // Searched in the bytes: no string decoded per reply.
          const bytes = Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength);
          this.kind.set(
            i,
            bytes.indexOf('"err"') < 0 ? 1 : bytes.indexOf('"overloaded"') >= 0 ? 2 : 3,
          );
        }
        this.replies++;
        this.onReply?.();
      },
    });
  }

  send(): void {
    const i = this.sent++;
    this.sentAt.set(i, performance.now());
    this.nc.publish(this.subject, body(i), { reply: `${this.inbox}.${i}` });
  }

  /** Closed loop: `inflight` calls outstanding until `total` were answered; calls per second. */
  async closedLoop(total: number, inflight: number): Promise<number> {
    const first = this.sent;
    const t0 = performance.now();
    let answered = 0;
    await new Promise<void>((resolve) => {
      this.onReply = () => {
        if (++answered >= total) return resolve();
        if (this.sent - first < total) this.send();
      };
      for (let k = 0; k < inflight; k++) this.send();
    });
    this.onReply = undefined;
    return total / ((performance.now() - t0) / 1000);
  }

  /**
   * Until replies stop coming (none for 500 ms, 30 s at most): a backlog left by a 2× block
   * (with shedding off, seconds of it) would otherwise be measured by the next round.
   */
  async quiet(): Promise<void> {
    const until = performance.now() + 30_000;
    for (let seen = -1; seen !== this.replies && performance.now() < until;) {
      seen = this.replies;
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /**
   * Open loop: `rate` calls per second for SECONDS on a timer (`sendingDone` is called at
   * its end), then the deadline to answer.
   */
  async openLoop(rate: number, sendingDone: () => void = () => undefined): Promise<OpenLoop> {
    const first = this.sent;
    // The generator's own event-loop delay: when it falls behind, replies are read (and
    // timed) late, and a late answer is then the generator's, not the service's.
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const start = performance.now();
    await new Promise<void>((resolve) => {
      let sent = 0;
      const timer = setInterval(() => {
        const elapsed = performance.now() - start;
        const target = Math.floor((Math.min(elapsed, SECONDS * 1000) / 1000) * rate);
        for (; sent < target; sent++) this.send();
        if (elapsed >= SECONDS * 1000) {
          clearInterval(timer);
          sendingDone();
          resolve();
        }
      }, TICK_MS);
    });
    await new Promise((r) => setTimeout(r, DEADLINE_MS + 500));
    lag.disable();
    const generatorLagMs = { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 };
    const out = {
      offered: 0,
      ok: 0,
      overloaded: 0,
      noResponders: 0,
      otherErrors: 0,
      unanswered: 0,
      lateAnswers: 0,
    };
    const answered: number[] = [];
    for (let i = first; i < this.sent; i++) {
      out.offered++;
      const at = this.answeredAt.get(i);
      if (at === 0) {
        out.unanswered++;
        continue;
      }
      const ms = at - this.sentAt.get(i);
      answered.push(ms);
      if (ms > DEADLINE_MS) {
        out.lateAnswers++;
        continue; // the caller had given up: not an answer
      }
      const kind = this.kind.get(i);
      if (kind === 1) out.ok++;
      else if (kind === 2) out.overloaded++;
      else if (kind === 4) out.noResponders++;
      else out.otherErrors++;
    }
    return { ...out, okPerSecond: out.ok / SECONDS, answered, generatorLagMs };
  }
}

/** A growable column of numbers (0 until set), by call number. */
class Column<T extends Float64Array | Uint8Array> {
  private data: T;

  constructor(private readonly Kind: new (length: number) => T) {
    this.data = new Kind(1 << 20);
  }

  get(i: number): number {
    return i < this.data.length ? this.data[i]! : 0;
  }

  set(i: number, value: number): void {
    if (i >= this.data.length) {
      const grown = new this.Kind(Math.max(2 * this.data.length, i + 1));
      grown.set(this.data);
      this.data = grown;
    }
    this.data[i] = value;
  }
}

interface Counts {
  offered: number;
  ok: number;
  overloaded: number;
  noResponders: number;
  otherErrors: number;
  unanswered: number;
  lateAnswers: number;
}

interface OpenLoop extends Counts {
  okPerSecond: number;
  /** Ms to each answer (late ones included). */
  answered: number[];
  generatorLagMs: { p99: number; max: number };
}

/** Shares of wall time: on a CPU, and runnable but waiting for one (the rest is idle). */
interface Share {
  onCpu: number;
  waiting: number;
}

async function run(
  nats: NatsServer,
  prefix: string,
  env: Record<string, string>,
  flags: readonly string[] = SERVICE_NODE_FLAGS,
  instances = 1,
) {
  // More than one: a cluster on a shared metadata bucket, whose roster lets every instance
  // but the anchor (the smallest live id) step out of the queue group.
  const cluster = (i: number): Record<string, string> =>
    instances === 1
      ? {}
      : {
          EPD_REGISTRY_STORE: 'jetstream',
          EPD_KV_BUCKET: `${prefix}_meta`,
          EPD_INSTANCE_ID: `${prefix}-${i}`,
          EPD_INSTANCE_HEARTBEAT_MS: '500',
        };
  const services: Awaited<ReturnType<typeof startService>>[] = [];
  for (let i = 0; i < instances; i++)
    services.push(
      await startService(
        { EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: prefix, ...cluster(i), ...env },
        flags,
      ),
    );
  // The first (the anchor in a cluster) is the one whose main thread and GC are read.
  const service = services[0]!;
  const nc = await connect({ servers: nats.url });
  const subject = `${prefix}.v1.wait_metadata`;
  try {
    await publishBenchEntries(nc, prefix, ENTRIES, META);
    const gen = new Generator(nc, subject);
    await gen.closedLoop(QUICK ? 1_000 : 10_000, INFLIGHT); // warm-up
    const pid = service.proc.pid!;
    const share = (
      s0: ReturnType<typeof mainThreadSched>,
      s1: ReturnType<typeof mainThreadSched>,
      wall: number,
    ): Share => ({
      onCpu: (s1.onCpuMs - s0.onCpuMs) / wall,
      waiting: (s1.waitingMs - s0.waitingMs) / wall,
    });
    const rounds: { sustainable: number; loaded: OpenLoop; atRate: Share; atTwice: Share }[] = [];
    const gc = { major: 0, minor: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      const [s0, t0] = [mainThreadSched(pid), performance.now()];
      const rate = await gen.closedLoop(QUICK ? 3_000 : 40_000, INFLIGHT);
      const atRate = share(s0, mainThreadSched(pid), performance.now() - t0);
      const gcBefore = await serviceGc(service.url);
      const [s2, t2] = [mainThreadSched(pid), performance.now()];
      let atTwice: Share | undefined;
      // The main thread's share while the load is offered (not in the grace period after).
      const loaded = await gen.openLoop(2 * rate, () => {
        atTwice = share(s2, mainThreadSched(pid), performance.now() - t2);
      });
      const gcAfter = await serviceGc(service.url);
      gc.major += gcAfter.major.seconds - gcBefore.major.seconds;
      gc.minor += gcAfter.minor.seconds - gcBefore.minor.seconds;
      rounds.push({ sustainable: rate, loaded, atRate, atTwice: atTwice! });
      await gen.quiet();
    }
    const metrics = await Promise.all(
      services.map(async (x) => (await fetch(`${x.url}/metrics`)).text()),
    );
    // Summed over the instances.
    const total = (name: string) =>
      metrics.reduce(
        (n, m) => n + Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(m)?.[1] ?? 0),
        0,
      );
    const loaded = rounds.map((r) => r.loaded);
    const sum = (key: keyof Counts) => loaded.reduce((n, l) => n + l[key], 0);
    const counts: Counts = {
      offered: sum('offered'),
      ok: sum('ok'),
      overloaded: sum('overloaded'),
      noResponders: sum('noResponders'),
      otherErrors: sum('otherErrors'),
      unanswered: sum('unanswered'),
      lateAnswers: sum('lateAnswers'),
    };
    const mean = (pick: (r: (typeof rounds)[number]) => number) =>
      round(rounds.reduce((n, r) => n + pick(r), 0) / rounds.length, 2);
    // Per round: the sustainable rate, and the ok rate at 2× against it.
    const perRound = rounds.map((r) => ({
      sustainable: round(r.sustainable, 0),
      okRatio: round(r.loaded.okPerSecond / r.sustainable, 3),
      // For the split of the gap to the cost ceiling (main): the main thread's shares of
      // wall time in the closed loop and at 2×, and the calls served and shed a second.
      onCpuAtRate: r.atRate.onCpu,
      onCpuAtTwice: r.atTwice.onCpu,
      okPerSecond: r.loaded.okPerSecond,
      shedPerSecond: r.loaded.overloaded / SECONDS,
    }));
    return {
      rounds: perRound,
      // Main-thread CPU per served call in the closed loops, µs (median over rounds).
      servedUs: median(rounds.map((r) => (r.atRate.onCpu / r.sustainable) * 1e6)),
      sustainable: median(perRound.map((r) => r.sustainable)),
      okRatio: median(perRound.map((r) => r.okRatio)),
      counts,
      answeredMs: summarize(loaded.flatMap((l) => l.answered)),
      generatorLagMs: {
        p99: Math.max(...loaded.map((l) => l.generatorLagMs.p99)),
        max: Math.max(...loaded.map((l) => l.generatorLagMs.max)),
      },
      // The service's main thread: share of wall time on a CPU (and runnable, waiting for
      // one), in the closed loops and while the 2× load was offered; mean over rounds.
      mainThread: {
        sustainable: { onCpu: mean((r) => r.atRate.onCpu), waiting: mean((r) => r.atRate.waiting) },
        loaded: { onCpu: mean((r) => r.atTwice.onCpu), waiting: mean((r) => r.atTwice.waiting) },
      },
      // Its pauses for garbage collection during the 2× blocks (and their grace periods).
      gcSeconds: { major: round(gc.major, 2), minor: round(gc.minor, 2) },
      stepOuts: total('epd_encoder_nats_step_outs_total'),
      outOfGroupSeconds: round(total('epd_encoder_nats_out_of_group_seconds_total'), 2),
    };
  } finally {
    await nc.drain();
    for (const x of services) await x.stop();
  }
}

/**
 * What a shed answer costs the main thread against a served one, in µs of CPU per call,
 * offered open-loop at `rate` for SECONDS: the service with EPD_OVERLOAD_MAX_QUEUED=1
 * (every call but the first one or two of each turn is shed; those served are charged at
 * `servedUs`), and a bare nats.js responder in its own process (read, answer a fixed
 * reply, nothing else: what any answer costs on nats.js, the floor of a shed one). With a
 * shed answer costing k of a served one, at 2× a process serves (1 − 2k) / (1 − k) of its
 * sustainable rate at best (its CPU spent on 2S calls, S of them shed at k), whatever
 * else it does right: the ceiling the ok-rate target meets.
 */
async function shedCost(nats: NatsServer, rate: number, servedUs: number) {
  const nc = await connect({ servers: nats.url });
  const service = await startService({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'ovcost',
    EPD_OVERLOAD_MAX_QUEUED: '1',
  });
  const bareSubject = 'ovbare.v1.wait_metadata';
  const bare = await startRawResponder(nats.url, bareSubject, '{"id":"epd-bare-1","response":{}}');
  try {
    await publishBenchEntries(nc, 'ovcost', ENTRIES, META);
    const measure = async (pid: number, subject: string) => {
      const gen = new Generator(nc, subject);
      await gen.closedLoop(QUICK ? 1_000 : 10_000, INFLIGHT); // warm-up
      const s0 = mainThreadSched(pid);
      let cpuMs = 0;
      const l = await gen.openLoop(rate, () => {
        cpuMs = mainThreadSched(pid).onCpuMs - s0.onCpuMs;
      });
      return { cpuUs: cpuMs * 1000, l };
    };
    const shed = await measure(service.proc.pid!, 'ovcost.v1.wait_metadata');
    const floor = await measure(bare.pid!, bareSubject);
    const shedUs = (shed.cpuUs - shed.l.ok * servedUs) / shed.l.overloaded;
    const bareUs = floor.cpuUs / floor.l.offered;
    const k = shedUs / servedUs;
    return {
      rate: round(rate, 0),
      servedUs: round(servedUs, 2),
      shedUs: round(shedUs, 2),
      bareUs: round(bareUs, 2),
      shedCalls: { offered: shed.l.offered, ok: shed.l.ok, overloaded: shed.l.overloaded },
      k: round(k, 3),
      ceiling: round((1 - 2 * k) / (1 - k), 2),
    };
  } finally {
    await stopProcess(bare);
    await nc.drain();
    await service.stop();
  }
}

async function main() {
  const nats = await NatsServer.start();
  // The encoder is what is measured: the load generator and nats-server (which stand for
  // clients and a NATS cluster elsewhere) yield the CPU to it on this shared machine.
  setPriority(process.pid, 19); // the generator runs on this (main) thread
  setProcessPriority(nats.pid!, 19);
  try {
    const on = await run(nats, 'ovon', {});
    const shedOnly = await run(nats, 'ovshed', { EPD_OVERLOAD_STEP_OUT: 'false' });
    const longQueue = await run(nats, 'ovlong', { EPD_OVERLOAD_SHEDDING_QUEUE_MS: '0' });
    const off = await run(nats, 'ovoff', { EPD_OVERLOAD_QUEUE_MS: '0' });
    const defaultYoung = await run(nats, 'ovyoung', {}, []);
    const pair = await run(nats, 'ovpair', {}, SERVICE_NODE_FLAGS, 2);
    const cost = await shedCost(nats, 2 * on.sustainable, on.servedUs);
    // The gap between the cost ceiling and the ok rate, split (median over the first row's
    // rounds): what a served call cost during the 2× blocks (their CPU less the shed
    // answers at the cost measured above, over the calls served), and the ceiling scaled by
    // the main thread's share of the machine at 2× against its share in the closed loop.
    const servedAtTwiceUs = round(
      median(
        on.rounds.map(
          (r) => (r.onCpuAtTwice * 1e6 - r.shedPerSecond * cost.shedUs) / r.okPerSecond,
        ),
      ),
      2,
    );
    const ceilingAtShare = round(
      median(on.rounds.map((r) => (cost.ceiling * r.onCpuAtTwice) / r.onCpuAtRate)),
      2,
    );
    const row = (name: string, r: typeof on) => {
      const l = r.counts;
      const pct = (n: number) => `${round((100 * n) / l.offered, 1)}%`;
      const ratios = r.rounds.map((x) => x.okRatio);
      return [
        name,
        `${round(r.sustainable, 0)} (${r.rounds.map((x) => x.sustainable).join(', ')})`,
        String(l.offered),
        pct(l.ok),
        pct(l.overloaded),
        pct(l.noResponders),
        pct(late(r)),
        `${round(r.okRatio, 2)} (${round(Math.min(...ratios), 2)}–${round(Math.max(...ratios), 2)})`,
        `${round(r.answeredMs.p50)} / ${round(r.answeredMs.p99)}`,
        `${round(r.generatorLagMs.p99)} / ${round(r.generatorLagMs.max)}`,
        `${r.mainThread.sustainable.onCpu} / ${r.mainThread.loaded.onCpu} (waiting ${r.mainThread.sustainable.waiting} / ${r.mainThread.loaded.waiting})`,
        `${r.stepOuts} / ${r.outOfGroupSeconds} s`,
        `${r.gcSeconds.major} / ${r.gcSeconds.minor} s`,
      ];
    };
    const okRatio = on.okRatio;
    const answeredInTime =
      (on.counts.offered - on.counts.unanswered - on.counts.lateAnswers) / on.counts.offered;
    const late = (r: typeof on) => r.counts.unanswered + r.counts.lateAnswers;
    writeReport({
      name: 'overload',
      quick: QUICK,
      machine: machine(),
      baseline: `the same service's sustainable wait_metadata rate, closed loop at ${INFLIGHT} in flight, measured just before each 2× block (${ROUNDS} rounds)`,
      results: {
        on,
        shedOnly,
        longQueue,
        off,
        defaultYoung,
        pair,
        cost,
        servedAtTwiceUs,
        ceilingAtShare,
        deadlineMs: DEADLINE_MS,
        rounds: ROUNDS,
        secondsPerRound: SECONDS,
      },
      targets: [
        {
          metric: `calls answered (ok, 503 overloaded or NATS 503 no responders) within their ${DEADLINE_MS} ms deadline at 2× the sustainable rate`,
          target: '100 (%)',
          value: round(100 * answeredInTime, 2),
          pass: answeredInTime === 1,
        },
        {
          // Not a property of the service: whether this run measured it. A generator that
          // fell behind reads replies late, and times them late.
          metric: `the load generator kept up at 2× (its event-loop delay p99 ≤ ${GENERATOR_LAG_OK_MS} ms); if not, late answers above are partly its own`,
          target: `≤ ${GENERATOR_LAG_OK_MS} ms`,
          value: round(on.generatorLagMs.p99, 1),
          pass: on.generatorLagMs.p99 <= GENERATOR_LAG_OK_MS,
        },
        {
          metric: `ok rate at 2× load / sustainable rate (median of ${ROUNDS} rounds, each against the rate measured just before it)`,
          target: 'near 1 (≥ 0.8)',
          value: round(okRatio, 2),
          pass: okRatio >= 0.8,
        },
        {
          // Reported, not a target: on this 2-core machine the two instances share the
          // cores with their own load generator, whose loop delay (its row) says whether
          // the run measured them or it.
          metric: `the same, two instances where one may step out (their sustainable rate together; read with their row's generator loop delay)`,
          target: 'report',
          value: round(pair.okRatio, 2),
          pass: true,
        },
        {
          // Reported, not a target: what the per-call costs measured in this run allow.
          metric: `the ok rate at 2× that a shed answer's cost allows, (1 − 2k) / (1 − k): a shed answer cost ${cost.shedUs} µs of main-thread CPU, k = ${cost.k} of a served one (${cost.servedUs} µs); a bare nats.js responder ${cost.bareUs} µs per answer`,
          target: 'report',
          value: cost.ceiling,
          pass: true,
        },
        {
          // Reported: whether serving under the 2× backlog cost more than in the closed loop.
          metric: `a served call's main-thread CPU during the 2× blocks, µs (derived: the blocks' CPU less the shed answers at the cost above, over the calls served; median over rounds), to read against the closed loop's in the cost row`,
          target: 'report',
          value: servedAtTwiceUs,
          pass: true,
        },
        {
          // Reported: whether the service got less of the machine at 2× than in the closed loop.
          metric: `the ceiling above scaled by the main thread's share of wall time on a CPU at 2× over its share in the closed loop (median over rounds): what this run's costs and the service's share of the shared machine allowed, to read against the ok rate`,
          target: 'report',
          value: ceilingAtShare,
          pass: true,
        },
      ],
      table: [
        [
          'service',
          'sustainable req/s: median (per round)',
          `offered in ${ROUNDS} × ${SECONDS} s at 2×`,
          'ok',
          '503 overloaded',
          '503 no responders (NATS)',
          'not answered in time',
          'ok rate / sustainable: median (range over rounds)',
          'answered p50 / p99 ms',
          'load generator loop delay p99 / max ms',
          'service main thread on a CPU, 1× / 2× (and runnable, waiting for one): share of wall time',
          'step-outs / time out of the group',
          'service main thread GC pauses at 2×, major / minor',
        ],
        row('one instance, as configured (sheds; never steps out alone)', on),
        row('shedding only (EPD_OVERLOAD_STEP_OUT=false)', shedOnly),
        row(
          'one instance, queue kept up to the callers’ budgets while shedding (EPD_OVERLOAD_SHEDDING_QUEUE_MS=0, as before 2026-12-06)',
          longQueue,
        ),
        row('shedding off (EPD_OVERLOAD_QUEUE_MS=0)', off),
        row(
          `the default, launched without ${SERVICE_NODE_FLAGS.join(' ')} (V8's default young generation)`,
          defaultYoung,
        ),
        row(
          'two instances (shared metadata bucket): the one that is not the anchor may step out',
          pair,
        ),
      ],
      notes: [
        `Rounds: the sustainable rate (closed loop), then ${SECONDS} s at twice that rate (open loop) and the deadline's grace, ${ROUNDS} times in the same service: each 2× block is compared with the rate measured just before it (this machine's speed drifts by tens of percent within a minute). The main thread's shares are over the closed loops and over the 2× blocks while the load was offered, means over rounds.`,
        'Open loop: calls are sent on a 5 ms timer at the offered rate whether or not earlier ones were answered, as independent clients do. An answer after the 1 s deadline counts as not answered (its caller gave up).',
        'Shedding in the group: once a lone instance has shed a call (it cannot step out), it keeps only EPD_OVERLOAD_SHEDDING_QUEUE_MS (default 10) of calls queued for as long as it sheds, whatever the calls declare; until that first shed, a call that declares a budget (here 1 s) may queue up to half of it, so each 2× block begins with up to 500 ms of calls queued and served late. The row with EPD_OVERLOAD_SHEDDING_QUEUE_MS=0 keeps the callers’ budgets as the bound throughout.',
        'Stepping out: once its queue holds half of EPD_OVERLOAD_QUEUE_MS of work (or it sheds a call), an instance withdraws its queue-group subscription of wait_metadata until the queue is down to a quarter, and the NATS server routes those calls to the instances still in the group. Only while the roster shows a live instance with a smaller id (the anchor) does an instance step out: a lone instance, or the anchor, never does, since with nobody left in the group every caller would get NATS no responders (an outage, not shedding). A lone instance thus sheds with 503 overloaded only: before 2026-12-05 it also stepped out, and NATS answered its callers no responders meanwhile, which is what met the ok-rate target in the first run kept. Calls an instance had already received are answered.',
        'Two instances: both on this machine’s two cores with the generator and nats-server, on a shared JetStream metadata bucket (the published entries in KV, each wait answered from its mirror); their sustainable rate is measured together, and the main thread and GC columns are the anchor’s.',
        `The service is launched as npm start launches it (${SERVICE_NODE_FLAGS.join(' ')}), except in the row that says otherwise: with V8's default young generation (16 MiB semi-spaces), the calls held in the queue survive scavenge after scavenge, and V8's parallel scavenger threads took about half a core of this 2-core machine at 2× (from /proc per-thread CPU times), away from the service's main thread and the rest.`,
        `Cost of a shed answer: the service with EPD_OVERLOAD_MAX_QUEUED=1 (it sheds every call but the first one or two of each turn; those ${cost.shedCalls.ok} served of ${cost.shedCalls.offered} are charged at the served cost) and a bare nats.js responder (raw-responder.ts: read, answer a fixed reply) each offered ${cost.rate} calls/s open-loop for ${SECONDS} s; main-thread CPU over the calls. The served cost is the first row's closed loops (CPU per call, median over rounds). At 2× a process spends its CPU on S served and S shed calls, so it serves at best (1 − 2k) / (1 − k) of S with a shed answer at k of a served one. The two rows after it split the gap between that ceiling and the first row's ok rate: a served call's cost during the 2× blocks against the closed loop's (serving under a backlog), and the ceiling scaled by the main thread's share of the machine at 2× against its share in the closed loop (the generator, nats-server and GC threads taking more of the two cores under load).`,
        'The load generator, nats-server and the service share this machine’s cores. The generator reads and times every reply on its one thread: while its own loop is delayed (last column), replies are timed late, so an answer counted late may have been on time.',
      ],
    });
  } finally {
    await nats.dispose();
  }
}

runBench(main);
