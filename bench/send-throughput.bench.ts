/**
 * Data plane, same run:
 *  - `send` of a staged ~8 MB and ~32 MB embedding through the service (NATS send →
 *    framed TCP → reference receiver → ack → NATS reply), against a raw loopback TCP
 *    framed transfer of the same bytes into one reused receive buffer, with an ack line;
 *  - fan-out: one send to each of 3 receivers at once, against the same 3 sends one
 *    after another.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import sharp from 'sharp';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, round, runBench, summarize, writeReport } from './common';
import { ROOT, startService, stopProcess } from './service-process';

const REPS = QUICK ? 4 : 30;
const SIZES = [
  { label: '8 MB', side: 1288 }, // 92x92 patches → 2116 tokens x 1024 x 4 B ≈ 8.7 MB
  { label: '32 MB', side: 2548 }, // 182x182 patches → 8281 tokens x 1024 x 4 B ≈ 33.9 MB
];

const RAW = join(__dirname, 'raw-tcp.js');
const RECEIVER_CLI = join(ROOT, 'dist', 'cli', 'receiver.js');

/** Spawns a process and resolves with the first line it prints on `stream`. */
function spawnWithLine(
  args: string[],
  stream: 'stdout' | 'stderr',
): Promise<{ proc: ChildProcess; line: string }> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    proc[stream].on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve({ proc, line: buf.slice(0, nl) });
    });
    proc.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${buf}`)));
  });
}

/**
 * Raw baseline: a raw sender process → a raw receiver process (one reused buffer), both
 * kept up for the whole size so that they are as warm as the service path.
 */
async function rawBaseline(bytes: number) {
  const rx = await spawnWithLine([RAW, 'receiver', String(bytes)], 'stdout');
  const tx = spawn(process.execPath, [RAW, 'sender', rx.line.trim(), String(bytes)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buf = '';
  let wake: (() => void) | undefined;
  tx.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      wake?.();
    }
  });
  const next = async () => {
    while (lines.length === 0) await new Promise<void>((r) => (wake = r));
    return lines.shift()!;
  };
  await next(); // ready
  return {
    async sends(n: number): Promise<number[]> {
      tx.stdin.write(`${n}\n`);
      return JSON.parse(await next()) as number[];
    },
    async stop() {
      tx.stdin.end();
      await stopProcess(tx);
      await stopProcess(rx.proc);
    },
  };
}

async function serviceSend(nc: NatsConnection, reqId: string, port: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  const msg = await nc.request(
    'bs.v1.send',
    JSON.stringify({ req_id: reqId, prefill_host: '127.0.0.1', embedding_port: port }),
    { timeout: 60_000 },
  );
  const reply = msg.json<{ response?: { bytes: number }; err?: unknown }>();
  if (!reply.response) throw new Error(`send failed: ${JSON.stringify(reply.err)}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function main() {
  const nats = await NatsServer.start();
  const service = await startService({
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'bs',
    EPD_MAX_PIXELS: String(8 * 1024 * 1024),
    EPD_STAGING_MAX_BYTES: String(2 * 1024 ** 3),
  });
  const nc = await connect({ servers: nats.url, maxPingOut: 10 });
  // Three reference receivers, each its own process, as three prefill ranks would be.
  const receivers = await Promise.all(
    [0, 1, 2].map(async () => {
      const { proc, line } = await spawnWithLine([RECEIVER_CLI, '--port', '0'], 'stderr');
      proc.stdout!.resume();
      return { proc, port: Number(/:(\d+)/.exec(line)![1]) };
    }),
  );
  const rows: string[][] = [];
  const results: Record<string, unknown> = {};
  const targets: { metric: string; target: string; value: number; pass: boolean }[] = [];
  try {
    for (const { label, side } of SIZES) {
      const png = await sharp({
        create: { width: side, height: side, channels: 3, background: { r: 60, g: 60, b: 60 } },
      })
        .png()
        .toBuffer();
      const reqId = `bench-${side}`;
      const enc = await nc.request(
        'bs.v1.encode',
        JSON.stringify({
          req_id: reqId,
          modality: 'image',
          mm_items: [`data:image/png;base64,${png.toString('base64')}`],
          num_parts: 1,
          part_idx: 0,
        }),
        { timeout: 120_000 },
      );
      const bytes = enc.json<{ response: { embedding_size: number } }>().response.embedding_size;

      for (let i = 0; i < 3; i++) await serviceSend(nc, reqId, receivers[0]!.port); // warm-up
      const raw = await rawBaseline(bytes);
      await raw.sends(3); // warm-up
      // Alternating blocks, so that machine noise and drift hit both paths alike.
      const svc: number[] = [];
      const base: number[] = [];
      const block = 5;
      for (let done = 0; done < REPS; done += block) {
        for (let i = 0; i < block; i++) svc.push(await serviceSend(nc, reqId, receivers[0]!.port));
        base.push(...(await raw.sends(block)));
      }
      await raw.stop();
      const s = summarize(svc);
      const b = summarize(base);
      const mbps = (ms: number) => bytes / 1e6 / (ms / 1000);
      const ratio = mbps(s.p50) / mbps(b.p50);

      // Fan-out: 3 receivers at once vs one after another.
      const fan: number[] = [];
      const seq: number[] = [];
      for (let i = 0; i < Math.max(3, REPS / 3); i++) {
        let t0 = process.hrtime.bigint();
        await Promise.all(receivers.map((r) => serviceSend(nc, reqId, r.port)));
        fan.push(Number(process.hrtime.bigint() - t0) / 1e6);
        t0 = process.hrtime.bigint();
        for (const r of receivers) await serviceSend(nc, reqId, r.port);
        seq.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      const f = summarize(fan);
      const q = summarize(seq);
      await nc.request('bs.v1.release', JSON.stringify({ req_id: reqId }), { timeout: 5000 });

      results[label] = { bytes, service: s, raw: b, fanOut: f, sequential: q };
      rows.push(
        [
          `${label} (${round(bytes / 1e6, 1)} MB)`,
          'service send incl. ack',
          String(round(s.p50, 2)),
          String(round(s.p99, 2)),
          String(round(mbps(s.p50), 0)),
          String(round(ratio, 2)),
        ],
        [
          '',
          'raw loopback TCP, reused buffer',
          String(round(b.p50, 2)),
          String(round(b.p99, 2)),
          String(round(mbps(b.p50), 0)),
          '1',
        ],
        [
          '',
          'fan-out to 3 at once',
          String(round(f.p50, 2)),
          String(round(f.p99, 2)),
          String(round((3 * bytes) / 1e6 / (f.p50 / 1000), 0)),
          String(round(f.p50 / q.p50, 2)),
        ],
        [
          '',
          '3 sequential sends',
          String(round(q.p50, 2)),
          String(round(q.p99, 2)),
          String(round((3 * bytes) / 1e6 / (q.p50 / 1000), 0)),
          '1',
        ],
      );
      targets.push({
        metric: `${label}: send throughput vs raw loopback TCP (p50)`,
        target: '≥ 0.7×',
        value: round(ratio, 2),
        pass: ratio >= 0.7,
      });
      targets.push({
        metric: `${label}: fan-out to 3 vs 3 sequential (time, p50)`,
        target: '< 1× (pipelines)',
        value: round(f.p50 / q.p50, 2),
        pass: f.p50 < q.p50,
      });
    }
    writeReport({
      name: 'send-throughput',
      quick: QUICK,
      machine: machine(),
      baseline:
        'raw loopback TCP framed transfer between two processes into one reused receive buffer, with an ack line',
      results,
      targets,
      table: [['embedding', 'path', 'p50 ms', 'p99 ms', 'MB/s at p50', 'ratio'], ...rows],
      notes: [
        'Every party is its own process: the NATS caller, the service, each receiver; the raw baseline is a sender process and a receiver process. The service path adds the NATS request-reply to each send.',
        'The reference receiver reads into pooled buffers: a fresh large Buffer per frame costs page faults on every frame here.',
      ],
    });
  } finally {
    await Promise.all(receivers.map((r) => stopProcess(r.proc)));
    await nc.drain();
    await service.stop();
    await nats.dispose();
  }
}

runBench(main);
