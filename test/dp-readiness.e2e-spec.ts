import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './support/calls';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

interface Ready {
  status: number;
  body: {
    error?: {
      serving?: { waiting_for?: Record<string, string> };
      encoder?: { not_ready?: Record<string, Record<string, string>>; error?: string };
    };
  };
}
interface Workers {
  workers: { dp_rank: number; alive: boolean; not_ready: Record<string, string> | null }[];
}

/**
 * A DP supervisor whose workers are up but not ready said only `"DP workers": "pending"`,
 * and, with none alive, `All encoder DP workers are dead.` while both were running: a model
 * that did not load, or a store that did not open, was named only in each worker's own log.
 * Each worker now reports what it waits for, or which condition failed, and the supervisor's
 * /health/ready and /admin/workers say it rank by rank.
 */
describe('a DP supervisor says why its workers are not ready (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-dp-ready-'));
  let nats: NatsServer;
  const started: ServiceProcess[] = [];

  const ready = async (svc: ServiceProcess): Promise<Ready> => {
    const res = await fetch(`${svc.url}/health/ready`);
    return { status: res.status, body: (await res.json()) as Ready['body'] };
  };
  const workers = async (svc: ServiceProcess) =>
    (await (await fetch(`${svc.url}/admin/workers`)).json()) as Workers;

  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: false });
  });
  afterAll(async () => {
    for (const svc of started) await svc.stop();
    await nats?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a model that does not load: each rank names it, and the supervisor does not call them dead', async () => {
    const model = join(dir, 'not-a-model.onnx');
    writeFileSync(model, randomBytes(4096));
    const svc = await startServiceProcess(
      { EPD_DP_SIZE: '2', EPD_MODEL_PATH: model, EPD_NATS_URL: nats.url },
      '/health/live',
    );
    started.push(svc);
    let last: Ready | undefined;
    const named = await waitFor(
      async () => {
        last = await ready(svc);
        // Each rank reports "pending" first, then the failure once its load fails.
        const notReady = Object.values(last.body.error?.encoder?.not_ready ?? {});
        return notReady.length === 2 && notReady.every((w) => w.model?.startsWith('Load model'));
      },
      30_000,
      50,
      () => JSON.stringify(last),
    );
    expect(named).toBe(true);
    expect(last!.status).toBe(503);
    const encoder = last!.body.error!.encoder!;
    for (const rank of ['rank 0', 'rank 1'])
      expect(encoder.not_ready![rank]).toEqual({
        model: expect.stringMatching(/^Load model from .*not-a-model\.onnx failed/) as string,
      });
    expect(encoder.error).toBe(
      'No encoder DP worker is ready: 2 running but not ready (not_ready says why), 0 not running.',
    );
    // Both failed their start: the supervisor's own start is over (it waits for no rank).
    expect(last!.body.error!.serving?.waiting_for?.['DP workers']).toBeUndefined();
    const view = await workers(svc);
    expect(view.workers.map((w) => [w.alive, Object.keys(w.not_ready ?? {})])).toEqual([
      [false, ['model']],
      [false, ['model']],
    ]);
    expect(svc.output()).toMatch(/DP worker rank=0 will not be ready: model: Load model from/);
  }, 60_000);

  it('a store that cannot open yet: "DP workers" says what each rank still waits for', async () => {
    // Its bucket needs JetStream, which this NATS server does not have: pending, not failed.
    const svc = await startServiceProcess(
      {
        EPD_DP_SIZE: '2',
        EPD_NATS_URL: nats.url,
        EPD_SUBJECT_PREFIX: `dpr${process.pid}`,
        EPD_REGISTRY_STORE: 'jetstream',
        EPD_KV_BUCKET: `dpr_${process.pid}`,
        EPD_KV_REPLICAS: '1',
      },
      '/health/live',
    );
    started.push(svc);
    let last: Ready | undefined;
    const pattern =
      /^rank 0 \(pid \d+\): metadata store: pending; rank 1 \(pid \d+\): metadata store: pending$/;
    const said = await waitFor(
      async () => {
        last = await ready(svc);
        return pattern.test(last.body.error?.serving?.waiting_for?.['DP workers'] ?? '');
      },
      30_000,
      50,
      () => JSON.stringify(last),
    );
    expect(said).toBe(true);
    expect(last!.status).toBe(503);
    expect(last!.body.error!.encoder!.not_ready).toEqual({
      'rank 0': { 'metadata store': 'pending' },
      'rank 1': { 'metadata store': 'pending' },
    });
  }, 60_000);
});
