import { z } from 'zod';
import { publicReqId } from '../common/tenant';

/** At most 512 characters as its caller wrote it (a tenant's inner form adds `<tenant>/`). */
export const reqIdSchema = z
  .string({ error: 'missing or invalid req_id' })
  .min(1, 'missing or invalid req_id')
  .refine((id) => publicReqId(id).length <= 512, 'req_id is longer than 512 characters');

const count = z.number().int().nonnegative();

export const embeddingMetaSchema = z.object({
  embedding_size: count.describe('bytes the receiver allocates (len × dim × dtype size)'),
  embedding_len: count.describe('tokens'),
  embedding_dim: z.number().int().positive().describe('embedding width'),
});
export const errorMetaSchema = z.object({ error: z.string().min(1) });
export const metaPayloadSchema = z.union([embeddingMetaSchema, errorMetaSchema], {
  error: 'metadata must be {embedding_size, embedding_len, embedding_dim} or {error}',
});

const partIdx = z.number().int().nonnegative().optional();
const timeoutMs = z
  .number()
  .int()
  .positive()
  .optional()
  .describe('how long to wait; default and cap EPD_REQ_TIMEOUT_MS');

export const publishMetadataSchema = z.object({
  req_id: reqIdSchema,
  part_idx: partIdx,
  metadata: metaPayloadSchema.describe('{embedding_size, embedding_len, embedding_dim} or {error}'),
});
export const waitMetadataSchema = z.object({
  req_id: reqIdSchema,
  part_idx: partIdx,
  timeout_ms: timeoutMs,
});
export const reqIdOnlySchema = z.object({ req_id: reqIdSchema });

/** Admin publish: the path carries req_id, the body the metadata. */
export const adminPublishSchema = z.object({ part_idx: partIdx, metadata: metaPayloadSchema });

export type EmbeddingMeta = z.infer<typeof embeddingMetaSchema>;
export type MetaPayload = z.infer<typeof metaPayloadSchema>;
export type PublishMetadataRequest = z.infer<typeof publishMetadataSchema>;
export type WaitMetadataRequest = z.infer<typeof waitMetadataSchema>;
export type ReqIdRequest = z.infer<typeof reqIdOnlySchema>;

export function isErrorMeta(m: MetaPayload): m is z.infer<typeof errorMetaSchema> {
  return 'error' in m;
}

/** The `wait_metadata` reply: the metadata plus the ids it answers for. */
export const waitMetadataResponseSchema = embeddingMetaSchema.extend({
  req_id: z.string(),
  part_idx: z.number().int().nonnegative(),
});
export type WaitMetadataResponse = z.output<typeof waitMetadataResponseSchema>;

/** The `has_metadata` reply. */
export const hasMetadataResponseSchema = z.object({ req_id: z.string(), present: z.boolean() });
export type HasMetadataResponse = z.output<typeof hasMetadataResponseSchema>;
