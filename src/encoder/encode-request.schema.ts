import { z } from 'zod';
import { MODALITIES, type Modality } from '../common/kernel';
import { Errors } from '../common/errors/error-catalogue';
import { reqIdOf } from '../common/req-id';
import { reqIdSchema } from '../meta-registry/meta.schema';
import type { MediaItem } from '../media/media-item';

/** A receiver's TCP port. */
const port = z.number().int().min(1).max(65535);
/** SGLang's legacy form lists one port per receiver; more than this is not a TP group. */
const MAX_TARGET_PORTS = 64;

export { MODALITIES, type Modality } from '../common/kernel';

/** Python's type names, so messages read as SGLang's do (`request is not a dict: list`). */
export function pyType(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'string') return 'str';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  return 'dict';
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

const mediaItem = z.union(
  [
    z.string().min(1),
    z.looseObject({
      url: z.string().min(1),
      content_hash: z
        .string()
        .regex(/^(sha256:)?[0-9a-fA-F]{64}$/, 'content_hash must be a sha256 hex digest')
        .optional(),
    }),
  ],
  { error: 'each mm_items entry must be a non-empty string or an object with a url' },
);

/**
 * The `/encode` body (docs/contract.md §2). Fields are checked in SGLang's order and the first
 * failure is reported with SGLang's exact message; unknown fields are ignored.
 */
export const encodeRequestSchema = z
  .looseObject(
    {
      // The same schema as every other route: an id no route could release must not be staged.
      req_id: reqIdSchema,
      modality: z
        .string({ error: 'missing or invalid modality' })
        .describe('image, video or audio (any case)')
        .transform((m, ctx) => {
          const lower = m.toLowerCase();
          if ((MODALITIES as readonly string[]).includes(lower)) return lower as Modality;
          ctx.addIssue({ code: 'custom', message: `unsupported modality: ${m}` });
          return z.NEVER;
        }),
      mm_items: z
        .array(mediaItem, { error: 'missing or empty mm_items' })
        .min(1, 'missing or empty mm_items')
        .describe(
          'data URI, bare base64, an allowed URL or a path under EPD_MEDIA_ROOT; or {url, content_hash?}',
        ),
      num_parts: z
        .unknown()
        .refine((v) => isInt(v) && v > 0, 'num_parts must be a positive integer')
        .describe('positive integer: parts the receiver assembles'),
      part_idx: z.unknown().describe('integer in [0, num_parts)'),
      hashes: z
        .unknown()
        .refine(
          (v) =>
            v === undefined ||
            v === null ||
            Array.isArray(v) ||
            ['string', 'number'].includes(typeof v),
          { error: (iss) => `hashes must be list/scalar, got ${pyType(iss.input)}` },
        )
        .optional()
        .describe("SGLang's per-item hashes; cache keys with EPD_CACHE_TRUST_CLIENT_HASH"),
      /** With EPD_CACHE_TRUST_CLIENT_HASH: the scope of the caller's hashes as cache keys. */
      cache_namespace: z
        .string()
        .regex(/^[\w.:-]{1,128}$/, 'cache_namespace must be 1-128 of [A-Za-z0-9_.:-]')
        .optional()
        .describe("scope of the caller's hashes as cache keys"),
      model: z
        .string({ error: 'model must be a string' })
        .min(1, 'model must not be empty')
        .max(256, 'model is longer than 256 characters')
        .optional()
        .describe("a served model's name (GET /admin/encoder lists them); absent: the default"),
      fps: z
        .number({ error: 'fps must be a number' })
        .positive('fps must be above 0')
        .max(240, 'fps must be at most 240')
        .optional()
        .describe(
          "video: the rate its frames were sampled at (default 2): Qwen2.5-VL's second_per_grid_ts, Qwen3-VL's timestamps",
        ),
      prefill_host: z.string().min(1).nullish().describe('push the embedding to this receiver'),
      embedding_port: z
        .union([port, z.array(port).max(MAX_TARGET_PORTS)])
        .nullish()
        .describe("the receiver's port (a list: one receiver per port)"),
      timeout_ms: z.number().int().positive().optional().describe('relative deadline'),
      deadline_ms: z.number().int().positive().optional().describe('absolute deadline, epoch ms'),
    },
    { error: (iss) => `request is not a dict: ${pyType(iss.input)}` },
  )
  .superRefine((req, ctx) => {
    const numParts = req.num_parts as number;
    const p = req.part_idx;
    if (!isInt(p) || p < 0 || p >= numParts) {
      ctx.addIssue({
        code: 'custom',
        path: ['part_idx'],
        message: `part_idx must be in [0, ${numParts})`,
      });
    }
  })
  // The output is the normalised request the pipeline works on. Its type (EncodeRequest)
  // is derived from this schema, so schema and type cannot drift; unknown fields (SGLang's
  // extras) are dropped here.
  .transform((r) => ({
    req_id: r.req_id,
    modality: r.modality,
    mm_items: r.mm_items.map((i): MediaItem =>
      typeof i === 'string' ? { url: i } : { url: i.url, content_hash: i.content_hash },
    ),
    num_parts: r.num_parts as number,
    part_idx: r.part_idx as number,
    hashes: r.hashes,
    cache_namespace: r.cache_namespace,
    model: r.model,
    fps: r.fps,
    prefill_host: r.prefill_host,
    embedding_port: r.embedding_port,
    timeout_ms: r.timeout_ms,
    deadline_ms: r.deadline_ms,
  }));

export type EncodeRequest = z.output<typeof encodeRequestSchema>;

/** Validates before anything is queued; throws a 400 with the first failure's message. */
export function parseEncodeRequest(body: unknown): EncodeRequest {
  const result = encodeRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const reqId = reqIdOf(body);
    const message =
      issue.path[0] === 'mm_items' && issue.path.length > 1
        ? `mm_items[${String(issue.path[1])}]: ${issue.message}`
        : issue.message;
    throw Errors.invalidEncode(message, reqId);
  }
  return result.data;
}
