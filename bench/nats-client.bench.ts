/**
 * What each NATS client setting the service chooses does when a node of a 3-node cluster
 * fails, measured with bare nats.js clients (no service): the settings are the ones in
 * src/transport/nats-options.ts, against nats.js's defaults.
 *
 * - Reconnect delay: a node SIGKILLed under a client given every node; time from the kill
 *   until a request through the client is answered again (its inbox and subscriptions
 *   made again on the node it moved to). nats.js's default against the service's
 *   `reconnectDelayHandler` (≈100 ms, backing off while nothing answers).
 * - Ping interval: a node hung (SIGSTOP: its sockets stay open, nothing is refused);
 *   time until the client notices and moves. The service's 2 s × 2 pings out against
 *   nats.js's 2 min (not waited for: reported as "> cap").
 * - Server list randomisation: where 12 clients given the same list land, shuffled (the
 *   default, kept) against `noRandomize`.
 *
 * usage: node dist-bench/bench/nats-client.bench.js [--quick]
 */
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AppConfig } from '../src/config/app-config';
import { natsConnectionOptions } from '../src/transport/nats-options';
import { NatsCluster } from '../test/support/nats-cluster';
import { QUICK, machine, median, runBench, writeReport } from './common';

const TRIALS = QUICK ? 1 : 8;
const HUNG_CAP_MS = QUICK ? 10_000 : 20_000;

/** The service's own connection options (src/transport/nats-options.ts), servers aside. */
const {
  servers: _servers,
  name: _name,
  ...SERVICE
} = natsConnectionOptions(
  { nats: { url: [] } } as unknown as AppConfig,
  'bench',
  () => 100, // the first step of the service's backoff (NatsConnectionService)
);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cluster = NatsCluster.start(3);
  const pidOf = (node: number) =>
    Number(readFileSync(join(cluster.dir, `node-${node}.pid`), 'utf8').trim());
  try {
    await sleep(1000);
    const echo = async (avoid: number): Promise<NatsConnection> => {
      const nc = await connect({ servers: cluster.urls.filter((_, i) => i + 1 !== avoid) });
      nc.subscribe('echo', { callback: (_e, m) => void m.respond('') });
      await nc.flush();
      return nc;
    };
    /** From the fault until a request through `nc` is answered again, in ms. */
    const backAfter = async (nc: NatsConnection, since: number, capMs: number) => {
      for (;;) {
        if (Date.now() - since > capMs) return Infinity;
        try {
          await nc.request('echo', '', { timeout: 20 });
          return Date.now() - since;
        } catch {
          // not yet
        }
      }
    };

    const killed = async (opts: Partial<ConnectionOptions>) => {
      const out: number[] = [];
      for (let t = 0; t < TRIALS; t++) {
        const nc = await connect({ servers: cluster.urls, maxReconnectAttempts: -1, ...opts });
        const node = cluster.nodeOfUrl(nc.getServer());
        const responder = await echo(node);
        const at = Date.now();
        process.kill(pidOf(node), 'SIGKILL');
        out.push(await backAfter(nc, at, 10_000));
        await nc.close();
        await responder.close();
        cluster.kill(node); // reaps it and forgets its PID
        cluster.restart(node);
        await sleep(1000);
      }
      return out;
    };
    const hung = async (opts: Partial<ConnectionOptions>) => {
      const out: number[] = [];
      for (let t = 0; t < Math.min(TRIALS, 3); t++) {
        const nc = await connect({ servers: cluster.urls, maxReconnectAttempts: -1, ...opts });
        const node = cluster.nodeOfUrl(nc.getServer());
        const responder = await echo(node);
        const at = Date.now();
        process.kill(pidOf(node), 'SIGSTOP');
        out.push(await backAfter(nc, at, HUNG_CAP_MS));
        process.kill(pidOf(node), 'SIGCONT');
        await nc.close();
        await responder.close();
        await sleep(1000);
      }
      return out;
    };
    const landing = async (opts: Partial<ConnectionOptions>) => {
      const counts = [0, 0, 0];
      const ncs: NatsConnection[] = [];
      for (let i = 0; i < 12; i++) {
        const nc = await connect({ servers: cluster.urls, ...opts });
        counts[cluster.nodeOfUrl(nc.getServer()) - 1]!++;
        ncs.push(nc);
      }
      for (const nc of ncs) await nc.close();
      return counts;
    };

    const killDefault = await killed({});
    const killService = await killed(SERVICE);
    const hungService = await hung(SERVICE);
    // nats.js's default is not waited out in the smoke run (--quick): it takes the cap.
    const hungDefault = QUICK ? [] : await hung({});
    const shuffled = await landing({});
    const ordered = await landing({ noRandomize: true });

    const fmt = (xs: number[]) => {
      if (xs.length === 0) return 'not measured (--quick)';
      const s = [...xs].sort((a, b) => a - b);
      const shown = (x: number) => (Number.isFinite(x) ? String(x) : `> ${HUNG_CAP_MS}`);
      return `${shown(median(s))} (${shown(s[0]!)}–${shown(s.at(-1)!)}, n=${s.length})`;
    };
    const ratio = median(killDefault) / Math.max(1, median(killService));
    writeReport({
      name: 'nats-client',
      quick: QUICK,
      machine: machine(),
      baseline: "nats.js's default settings, on the same cluster in the same run",
      results: { killDefault, killService, hungService, hungDefault, shuffled, ordered },
      targets: [
        {
          metric: 'node killed: back (ms), service settings, median',
          target: '≤ 200',
          value: median(killService),
          pass: median(killService) <= 200,
        },
        {
          metric: 'node hung: back (ms), service settings, median',
          target: '≤ 10000',
          value: median(hungService),
          pass: median(hungService) <= 10_000,
        },
      ],
      table: [
        ['fault', 'setting', 'nats.js default', 'the service', 'ratio'],
        [
          'node SIGKILLed: kill → a request answered again (ms)',
          'reconnectDelayHandler ≈100 ms (backs off)',
          fmt(killDefault),
          fmt(killService),
          `${ratio.toFixed(1)}×`,
        ],
        [
          'node hung (SIGSTOP): stop → a request answered again (ms)',
          'pingInterval 2 s, maxPingOut 2',
          fmt(hungDefault),
          fmt(hungService),
          '',
        ],
        [
          '12 clients, the same server list: clients per node',
          'server list shuffled (nats.js default, kept)',
          `noRandomize: ${ordered.join(' / ')}`,
          `shuffled: ${shuffled.join(' / ')}`,
          '',
        ],
      ],
      notes: [
        "A request answered again means the client reconnected to another node and made its subscriptions and its requests' inbox again there: nats.js does that on every reconnect, with no code of ours.",
        `A hung node is not waited for past ${HUNG_CAP_MS} ms: nats.js's default ping (every 2 min, 2 outstanding) notices it after minutes.`,
      ],
    });
  } finally {
    await cluster.stop();
  }
}

runBench(main);
