/**
 * wait_metadata over NATS for already-published entries, through the full service
 * (separate process: Nest microservice, validation, registry, filter), against a bare
 * nats.js responder process answering the same subject shape with a reply of the same
 * size. Both run in this same run on the same nats-server; blocks alternate so that
 * machine noise hits both alike.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsServer } from '../test/support/nats-server';
import {
  QUICK,
  machine,
  publishBenchEntries,
  round,
  runBench,
  summarize,
  writeReport,
} from './common';
import { startRawResponder, startService, stopProcess } from './service-process';

const ENTRIES = 1000;
const LATENCY_ROUNDS = QUICK ? 3 : 20;
const LATENCY_BLOCK = 250;
const INFLIGHT = 256;
const TPUT_REQUESTS = QUICK ? 5_000 : 60_000;
const TPUT_ROUNDS = QUICK ? 1 : 3;

const META = { embedding_size: 4 * 1024 * 1176, embedding_len: 1176, embedding_dim: 1024 };
const request = (i: number) => JSON.stringify({ req_id: `bench-${i % ENTRIES}`, part_idx: 0 });

async function latencyBlock(
  nc: NatsConnection,
  subject: string,
  n: number,
  offset: number,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const body = request(offset + i);
    const t0 = process.hrtime.bigint();
    const msg = await nc.request(subject, body, { timeout: 5000 });
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (msg.data.length === 0) throw new Error('empty reply');
  }
  return out;
}

async function throughput(nc: NatsConnection, subject: string, total: number): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const msg = await nc.request(subject, request(i), { timeout: 10_000 });
      if (msg.json<{ err?: unknown }>().err) throw new Error(`error reply: ${msg.string()}`);
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  return total / (Number(process.hrtime.bigint() - t0) / 1e9);
}

async function main() {
  const nats = await NatsServer.start();
  const prefix = 'bench';
  const service = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: prefix });
  const nc = await connect({ servers: nats.url });
  const waitSubject = `${prefix}.v1.wait_metadata`;
  try {
    await publishBenchEntries(nc, prefix, ENTRIES, META);
    // The baseline replies with exactly the bytes the service sends.
    const sample = await nc.request(waitSubject, request(0), { timeout: 5000 });
    const replyJson = sample.string();
    const raw = await startRawResponder(nats.url, 'raw.v1.wait_metadata', replyJson);

    try {
      // Warm-up both paths.
      await latencyBlock(nc, waitSubject, 500, 0);
      await latencyBlock(nc, 'raw.v1.wait_metadata', 500, 0);
      const svc: number[] = [];
      const base: number[] = [];
      for (let r = 0; r < LATENCY_ROUNDS; r++) {
        svc.push(...(await latencyBlock(nc, waitSubject, LATENCY_BLOCK, r * LATENCY_BLOCK)));
        base.push(
          ...(await latencyBlock(nc, 'raw.v1.wait_metadata', LATENCY_BLOCK, r * LATENCY_BLOCK)),
        );
      }
      const svcTput: number[] = [];
      const baseTput: number[] = [];
      for (let r = 0; r < TPUT_ROUNDS; r++) {
        svcTput.push(await throughput(nc, waitSubject, TPUT_REQUESTS));
        baseTput.push(await throughput(nc, 'raw.v1.wait_metadata', TPUT_REQUESTS));
      }
      const s = summarize(svc);
      const b = summarize(base);
      const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
      const st = median(svcTput);
      const bt = median(baseTput);
      const p50 = s.p50 / b.p50;
      const p99 = s.p99 / b.p99;
      const tput = st / bt;
      writeReport({
        name: 'wait-metadata-nats',
        quick: QUICK,
        machine: machine(),
        baseline: `bare nats.js request-reply responder process, same ${replyJson.length}-byte reply, same nats-server`,
        results: {
          service: { latencyMs: s, throughput: st },
          baseline: { latencyMs: b, throughput: bt },
          replyBytes: replyJson.length,
          inflight: INFLIGHT,
        },
        targets: [
          {
            metric: 'p50 latency, service / raw',
            target: '≤ 1.5×',
            value: round(p50, 2),
            pass: p50 <= 1.5,
          },
          {
            metric: 'p99 latency, service / raw',
            target: '≤ 3×',
            value: round(p99, 2),
            pass: p99 <= 3,
          },
          {
            metric: `throughput at ${INFLIGHT} in flight, service / raw`,
            target: '≥ 0.5×',
            value: round(tput, 2),
            pass: tput >= 0.5,
          },
        ],
        table: [
          ['path', 'p50 ms', 'p99 ms', 'mean ms', `req/s at ${INFLIGHT} in flight`],
          [
            'service wait_metadata',
            String(round(s.p50)),
            String(round(s.p99)),
            String(round(s.mean)),
            String(round(st, 0)),
          ],
          [
            'raw nats.js responder',
            String(round(b.p50)),
            String(round(b.p99)),
            String(round(b.mean)),
            String(round(bt, 0)),
          ],
          [
            'ratio',
            String(round(p50, 2)),
            String(round(p99, 2)),
            String(round(s.mean / b.mean, 2)),
            String(round(tput, 2)),
          ],
        ],
      });
    } finally {
      await stopProcess(raw);
    }
  } finally {
    await nc.drain();
    await service.stop();
    await nats.dispose();
  }
}

runBench(main);
