import { z } from 'zod';
import { reqIdSchema } from '../meta-registry/meta.schema';

const port = z.number().int().min(1).max(65535);
const count = z.number().int().positive();
const deadline = {
  timeout_ms: z.number().int().positive().optional(),
  /** Absolute deadline (epoch ms) that propagates through every stage. */
  deadline_ms: z.number().int().positive().optional(),
};

export const sendRequestSchema = z.looseObject({
  req_id: reqIdSchema,
  prefill_host: z.string().min(1),
  embedding_port: z.union([port, z.array(port).min(1)]),
  session_id: z.union([z.string(), z.number()]).nullish(),
  buffer_address: z.union([z.string(), z.number()]).nullish(),
  receive_count: count.optional(),
  ...deadline,
});

export const registerRequestSchema = z.looseObject({
  req_id: reqIdSchema,
  receive_count: count,
  receive_url: z.string().min(1),
  ...deadline,
});

export type SendRequest = z.infer<typeof sendRequestSchema>;
export type RegisterRequest = z.infer<typeof registerRequestSchema>;

/** One destination's delivery state, in encode replies and `send_status`. */
export const destinationViewSchema = z.object({
  endpoint: z.string(),
  status: z.enum(['pending', 'sending', 'acked', 'failed']),
  source: z.enum(['registered', 'send', 'encode']),
  deliveries: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative().optional(),
  error: z.string().optional(),
});

export type DestinationView = z.output<typeof destinationViewSchema>;
