import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { REPO_ROOT } from './repo-root';
import { waitFor } from './wait';

const SCRIPT = join(REPO_ROOT, 'scripts', 'nats-cluster.sh');

/**
 * A local NATS cluster (scripts/nats-cluster.sh: JetStream on every node, loopback ports,
 * nodes named n1…nN) with what a fault test needs to aim at a node: which node leads a
 * stream, which one a client is connected to, and "settled again" after a restart.
 */
export class NatsCluster {
  readonly urls: string[];
  private admin?: NatsConnection;
  private jsm?: JetStreamManager;

  private constructor(
    readonly dir: string,
    readonly nodes: number,
  ) {
    this.urls = this.run('start', String(nodes)).split(',');
  }

  static start(nodes = 3): NatsCluster {
    return new NatsCluster(mkdtempSync(join(tmpdir(), 'epd-cluster-')), nodes);
  }

  private run(...args: string[]): string {
    return execFileSync(SCRIPT, [args[0]!, this.dir, ...args.slice(1)])
      .toString()
      .trim();
  }

  /** 1-based index of the node whose client URL is `url` (as a service reports its server). */
  nodeOfUrl(url: string): number {
    const port = new URL(url.includes('://') ? url : `nats://${url}`).port;
    const i = this.urls.findIndex((u) => new URL(u).port === port);
    if (i < 0) throw new Error(`${url} is no node of this cluster (${this.urls.join(',')})`);
    return i + 1;
  }

  /** 1-based index of node `name` (n1…nN, the server_name in its config). */
  nodeOfName(name: string): number {
    const i = Number(/^n(\d+)$/.exec(name)?.[1]);
    if (!Number.isInteger(i) || i < 1 || i > this.nodes) throw new Error(`no node named ${name}`);
    return i;
  }

  /**
   * The environment of an instance on this cluster sharing the R3 metadata bucket
   * `bucket` under subject prefix `prefix`, given `servers` (all the nodes, in its order).
   */
  instanceEnv(id: string, prefix: string, bucket: string, servers = this.urls) {
    return {
      EPD_NATS_URL: servers.join(','),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: bucket,
      EPD_KV_REPLICAS: String(this.nodes),
      EPD_INSTANCE_ID: id,
      EPD_INSTANCE_HEARTBEAT_MS: '500',
    };
  }

  kill(node: number): void {
    this.run('kill-node', String(node));
  }

  restart(node: number): void {
    this.run('start-node', String(node));
  }

  /** A JetStream admin client on the live nodes (it follows them across kills). */
  private async manager(): Promise<JetStreamManager> {
    if (!this.jsm) {
      this.admin = await connect({ servers: this.urls, maxReconnectAttempts: -1 });
      this.jsm = await jetstreamManager(this.admin, { timeout: 2000 });
    }
    return this.jsm;
  }

  /** The node that leads `stream` now (its raft leader), or undefined during an election. */
  async streamLeader(stream: string): Promise<number | undefined> {
    const info = await (await this.manager()).streams.info(stream).catch(() => undefined);
    const leader = info?.cluster?.leader;
    return leader ? this.nodeOfName(leader) : undefined;
  }

  /** The JetStream meta leader now (from a live node's /jsz), or undefined during an election. */
  async metaLeader(): Promise<number | undefined> {
    const env = readFileSync(join(this.dir, 'cluster.env'), 'utf8');
    for (let i = 1; i <= this.nodes; i++) {
      const port = new RegExp(`^NODE_${i}_HTTP=(\\d+)$`, 'm').exec(env)?.[1];
      const jsz = await fetch(`http://127.0.0.1:${port}/jsz`)
        .then((r) => r.json() as Promise<{ meta_cluster?: { leader?: string } }>)
        .catch(() => undefined);
      const leader = jsz?.meta_cluster?.leader;
      if (leader) return this.nodeOfName(leader);
    }
    return undefined;
  }

  /**
   * Every node up, and each stream led with all of its replicas current: what a test waits
   * for after restarting a node, so that the next fault starts from a whole cluster.
   */
  async settled(streams: string[], timeoutMs = 60_000): Promise<void> {
    const jsm = await this.manager();
    let last = '';
    await waitFor(
      async () => {
        if ((await this.metaLeader()) === undefined) {
          last = 'no JetStream meta leader';
          return false;
        }
        for (const stream of streams) {
          const info = await jsm.streams.info(stream).catch((err: Error) => err);
          if (info instanceof Error) {
            last = `${stream}: ${info.message}`;
            return false;
          }
          const c = info.cluster;
          const peers = c?.replicas ?? [];
          if (!c?.leader || peers.length !== this.nodes - 1 || peers.some((p) => !p.current)) {
            last = `${stream}: ${JSON.stringify(c)}`;
            return false;
          }
        }
        return true;
      },
      timeoutMs,
      100,
      () => `cluster did not settle: ${last}`,
    );
  }

  async stop(): Promise<void> {
    await this.admin?.close().catch(() => undefined);
    this.run('stop');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
