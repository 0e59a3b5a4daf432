import { z } from 'zod';

/** The most an instance may claim of any one load figure (a forged heartbeat is capped by it). */
const MAX_RATE = 1_000_000;
const MAX_DEPTH = 10_000_000;
const MAX_AGE_MS = 24 * 3600 * 1000;

const figure = (max: number) => z.number().finite().min(0).max(max);

const loadSchema = z.object({
  arrival_rate: figure(MAX_RATE),
  service_rate: figure(MAX_RATE),
  queue_depth: figure(MAX_DEPTH),
  oldest_queued_ms: figure(MAX_AGE_MS),
});

const entrySchema = z.object({
  id: z.string().min(1).max(256),
  rank: z.number().int().min(0).max(4096),
  pid: z.number().int().min(0),
  host: z.string().max(256),
  http_url: z.string().max(2048),
  started_at: z.number().finite(),
  load: loadSchema.optional(),
});

/** One instance's roster entry (its heartbeat). */
export type InstanceInfo = z.infer<typeof entrySchema>;

/**
 * A roster value as an InstanceInfo, or undefined when it is not one: not JSON, not an
 * object of the entry's shape, load figures that are not finite, negative or past what any
 * encoder measures (a forged heartbeat took the cluster's desired encoders from 1 to 16,
 * and a NaN made it null), or an id that is not the key it was stored under.
 */
export function parseRosterEntry(key: string, value: Uint8Array): InstanceInfo | undefined {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(value).toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = entrySchema.safeParse(json);
  if (!parsed.success || parsed.data.id !== key) return undefined;
  return parsed.data;
}
