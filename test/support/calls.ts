import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import type { TestApp } from './app';

export type Reply = {
  response?: Record<string, unknown> & { timings?: Record<string, number> };
  err?: { status: string; code: number; message: string; req_id: string | null } & Record<
    string,
    unknown
  >;
};

/** One NATS request to a test app's `<prefix>.v1.<dp>`, as a bare-JSON client sends it. */
export async function natsCall(
  nc: NatsConnection,
  t: TestApp,
  dp: string,
  data: unknown,
  options: { timeout?: number; headers?: Record<string, string> } = {},
): Promise<Reply> {
  let hdrs;
  if (options.headers) {
    hdrs = natsHeaders();
    for (const [k, v] of Object.entries(options.headers)) hdrs.set(k, v);
  }
  const msg = await nc.request(
    `${t.config.nats.subjectPrefix}.v1.${dp}`,
    typeof data === 'string' ? data : JSON.stringify(data),
    { timeout: options.timeout ?? 30_000, ...(hdrs ? { headers: hdrs } : {}) },
  );
  return msg.json<Reply>();
}

/** One call on `epd.v1.<dp>` (the default prefix) as the identity `nc` connected with. */
export async function callAs(nc: NatsConnection, dp: string, data: object): Promise<Reply> {
  const msg = await nc.request(`epd.v1.${dp}`, JSON.stringify(data), { timeout: 10_000 });
  return msg.json<Reply>();
}

/** A one-part `/encode` body. */
export const encodeBody = (reqId: string, items: unknown[], modality = 'image') => ({
  req_id: reqId,
  modality,
  mm_items: items,
  num_parts: 1,
  part_idx: 0,
});

export { waitFor } from './wait';
