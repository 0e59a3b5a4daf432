import { z } from 'zod';
import { reqIdSchema } from '../meta-registry/meta.schema';

const port = z.number().int().min(1).max(65535);
const count = z.number().int().positive();
const deadline = {
  timeout_ms: z.number().int().positive().optional().describe('relative deadline'),
  /** Absolute deadline (epoch ms) that propagates through every stage. */
  deadline_ms: z.number().int().positive().optional().describe('absolute deadline, epoch ms'),
};

export const sendRequestSchema = z.looseObject({
  req_id: reqIdSchema,
  prefill_host: z.string().min(1),
  embedding_port: z.union([port, z.array(port).min(1)]),
  session_id: z.union([z.string(), z.number()]).nullish().describe('echoed in the frame header'),
  buffer_address: z
    .union([z.string(), z.number()])
    .nullish()
    .describe("Mooncake's RDMA target: refused (400) with EPD_TRANSFER_BACKEND=zmq"),
  receive_count: count.optional().describe('receivers of this req_id; it is released once all ack'),
  ...deadline,
});

export const registerRequestSchema = z.looseObject({
  req_id: reqIdSchema,
  receive_count: count.describe('receivers that will register for this req_id'),
  receive_url: z.string().min(1).describe('host:port or tcp://host:port of the receiver'),
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

/** The `send` reply: answered after the receiver's ack. */
export const sendReplySchema = z.object({
  req_id: z.string(),
  bytes: z.number().int().nonnegative(),
  acked: z.literal(true),
});
export type SendReply = z.output<typeof sendReplySchema>;

/** The `send_status` reply: the request's phase and every destination's delivery. */
export const sendStatusSchema = z.object({
  req_id: z.string(),
  state: z.enum(['encoding', 'staged', 'release-pending', 'released']),
  receive_count: z.number().int().positive().nullable(),
  acked: z.number().int().nonnegative(),
  destinations: z.array(destinationViewSchema),
});
export type SendStatus = z.output<typeof sendStatusSchema>;
