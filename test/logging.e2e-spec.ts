import { connect } from '@nats-io/transport-node';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { waitFor } from './support/calls';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/** The log lines an operator greps by req_id: NATS lines carry the dp_type, none repeats req_id. */
describe('log context (e2e, built service process)', () => {
  let svc: ServiceProcess;
  let prefix: string;
  beforeAll(async () => {
    prefix = uniquePrefix();
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_LOG_LEVEL: 'warn',
    });
  });
  afterAll(() => svc.stop());

  const lines = () =>
    svc
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
  const lineAbout = (reqId: string) => lines().find((l) => l.includes(`"req_id":"${reqId}"`));

  it('a NATS handler log line carries req_id and dp_type', async () => {
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      await nc.request(
        `${prefix}.v1.wait_metadata`,
        JSON.stringify({ req_id: 'log-nats', timeout_ms: 1 }),
      );
    } finally {
      await nc.drain();
    }
    const found = await waitFor(() => lineAbout('log-nats') !== undefined);
    if (!found) process.stderr.write(`OUT>${svc.output().slice(-3000)}\n`);
    expect(found).toBe(true);
    const line = lineAbout('log-nats')!;
    expect(JSON.parse(line)).toMatchObject({
      req_id: 'log-nats',
      dp_type: 'wait_metadata',
      msg: 'encode metadata not ready',
    });
    expect(line.match(/"req_id"/g)).toHaveLength(1);
  });

  it('an HTTP error log line carries req_id once', async () => {
    await fetch(`${svc.url}/scheduler_receive_meta_data`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ req_id: 'log-http', timeout_ms: 1 }),
    });
    expect(await waitFor(() => lineAbout('log-http') !== undefined)).toBe(true);
    const line = lineAbout('log-http')!;
    expect(JSON.parse(line)).toMatchObject({
      req_id: 'log-http',
      msg: 'encode metadata not ready',
    });
    expect(line.match(/"req_id"/g)).toHaveLength(1);
  });
});
