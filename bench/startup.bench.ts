/**
 * Start-up under load: does an instance refuse calls while it is still starting?
 *
 * Instance A serves on a JetStream-backed shared store; a client keeps `wait_metadata` for
 * a published req_id in flight on the shared subject (the queue group), and two
 * CPU-bound processes keep both cores busy. Instance B is started and stopped again,
 * again and again: every call the queue group gives B while it starts must be answered
 * as A would answer it, never refused because B's store is not open yet. Counted from a
 * client-side ledger: calls, refusals by type, and calls with no answer; and how long B
 * took from spawn until `/health/ready` said 200.
 *
 * usage: node dist-bench/bench/startup.bench.js [--quick]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import { NatsServer } from '../test/support/nats-server';
import { startServiceProcess, type ServiceProcess } from '../test/support/service-process';
import { QUICK, machine, percentile, runBench, writeReport } from './common';

const STARTS = QUICK ? 2 : 50;
const DEADLINE_MS = 2000;

/** A process that keeps one core busy until it is killed (by its PID). */
function burner(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const nats = await NatsServer.start();
  const prefix = `sub${process.pid}`;
  const env = (id: string) => ({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: prefix,
    EPD_REGISTRY_STORE: 'jetstream',
    EPD_KV_BUCKET: `sub_${process.pid}`,
    EPD_KV_REPLICAS: '1',
    EPD_INSTANCE_ID: id,
    // The one published req_id must outlive the run (the default TTL is 180 s).
    EPD_SEND_TIMEOUT_MS: '3600000',
  });
  const burners: ChildProcess[] = [];
  let a: ServiceProcess | undefined;
  let b: ServiceProcess | undefined;
  const nc = await connect({ servers: nats.url });
  const refusals = new Map<string, number>();
  let calls = 0;
  let never = 0;
  let stop = false;
  const readyMs: number[] = [];
  try {
    a = await startServiceProcess(env('a'));
    const published = await nc.request(
      `${prefix}.v1.publish_metadata`,
      JSON.stringify({
        req_id: 'x',
        metadata: { embedding_size: 8, embedding_len: 1, embedding_dim: 2 },
      }),
      { timeout: 5000 },
    );
    if (published.json<{ err?: unknown }>().err) throw new Error('publish failed');
    // Not in the smoke run (--quick): it runs beside the other lanes, whose services the
    // two burners starved (CI: shared-metadata's service stepped out of its queue group).
    if (!QUICK) burners.push(burner(), burner());

    const client = async () => {
      while (!stop) {
        calls++;
        try {
          const msg = await nc.request(
            `${prefix}.v1.wait_metadata`,
            JSON.stringify({ req_id: 'x', timeout_ms: DEADLINE_MS }),
            { timeout: DEADLINE_MS + 2000 },
          );
          const err = msg.json<{ err?: { type?: string; message?: string } }>().err;
          if (err) {
            const key = `${err.type}: ${err.message}`;
            refusals.set(key, (refusals.get(key) ?? 0) + 1);
          }
        } catch (err) {
          const key = `client: ${(err as Error).message}`;
          if (/timeout/i.test(key)) never++;
          else refusals.set(key, (refusals.get(key) ?? 0) + 1);
        }
      }
    };
    const load = [client(), client(), client(), client()];

    for (let i = 0; i < STARTS; i++) {
      const spawned = Date.now();
      b = await startServiceProcess(env('b'));
      readyMs.push(Date.now() - spawned);
      await b.stop();
      b = undefined;
      process.stdout.write(`start ${i + 1}: ready in ${readyMs.at(-1)} ms\n`);
    }
    stop = true;
    await Promise.all(load);
  } finally {
    stop = true;
    for (const p of burners) p.kill('SIGKILL');
    await nc.close().catch(() => undefined);
    await b?.stop();
    await a?.stop();
    await nats.dispose();
  }

  const refused = [...refusals.values()].reduce((x, y) => x + y, 0);
  const notOpen = [...refusals]
    .filter(([k]) => /not open yet/.test(k))
    .reduce((x, [, n]) => x + n, 0);
  const sorted = [...readyMs].sort((x, y) => x - y);
  writeReport({
    name: 'startup',
    quick: QUICK,
    machine: machine(),
    baseline: 'the same calls answered by the instance already serving (every one succeeds)',
    results: {
      starts: STARTS,
      calls,
      refused,
      notOpen,
      never,
      refusals: Object.fromEntries(refusals),
      readyMs: sorted,
    },
    targets: [
      {
        metric: `calls refused because the store was not open (${STARTS} starts under load)`,
        target: '= 0',
        value: notOpen,
        pass: notOpen === 0,
      },
      {
        metric: 'calls not answered within deadline + 2 s',
        target: '= 0',
        value: never,
        pass: never === 0,
      },
    ],
    table: [
      [
        'starts',
        'calls',
        'refused',
        'of them "not open yet"',
        'never answered',
        'spawn → ready p50 / max (ms)',
      ],
      [
        String(STARTS),
        String(calls),
        String(refused),
        String(notOpen),
        String(never),
        `${percentile(sorted, 50)} / ${sorted.at(-1)}`,
      ],
    ],
    notes: [
      'Four clients keep wait_metadata for a published req_id in flight on the shared subject; two CPU-bound processes keep both cores busy; instance B is started (until /health/ready is 200) and stopped, again and again.',
      `Refusals by type: ${[...refusals].map(([k, n]) => `${k} ×${n}`).join('; ') || 'none'}.`,
    ],
  });
}

runBench(main);
