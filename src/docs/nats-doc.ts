import { z } from 'zod';
import { errorBodySchema } from '../common/openapi/zod-openapi';
import {
  registerRequestSchema,
  sendReplySchema,
  sendRequestSchema,
  sendStatusSchema,
} from '../delivery/delivery.schema';
import { encodeRequestSchema } from '../encoder/pipeline/encode-request.schema';
import { encodeResponseSchema } from '../encoder/pipeline/encode-response';
import {
  hasMetadataResponseSchema,
  publishMetadataSchema,
  reqIdOnlySchema,
  waitMetadataResponseSchema,
  waitMetadataSchema,
} from '../meta-registry/meta.schema';
import { profileRequestSchema } from '../profiling/profile.schema';
import { DpType } from '../transport/subjects';

interface Json {
  type?: string | string[];
  properties?: Record<string, Json>;
  required?: string[];
  items?: Json;
  anyOf?: Json[];
  enum?: unknown[];
  const?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  additionalProperties?: unknown;
}

interface Operation {
  what: string;
  request: z.ZodType;
  /** The reply's schema, or its literal shape in words. */
  reply: z.ZodType | string;
}

/** Every dp_type, with the schemas its handler validates with and replies in. */
const OPERATIONS: Record<DpType, Operation> = {
  [DpType.Encode]: {
    what: 'Load, preprocess and encode media; metadata is published as soon as the size is known, and the embedding is staged (and pushed to `prefill_host:embedding_port` when given).',
    request: encodeRequestSchema,
    reply: encodeResponseSchema,
  },
  [DpType.PublishMetadata]: {
    what: 'Publish the metadata of a req_id (or `{error}`), waking every waiter.',
    request: publishMetadataSchema,
    reply: '`null`',
  },
  [DpType.WaitMetadata]: {
    what: 'Wait until the metadata of a req_id is published; 504 `encode metadata not ready` at the deadline (`timeout_ms`, capped by EPD_REQ_TIMEOUT_MS).',
    request: waitMetadataSchema,
    reply: waitMetadataResponseSchema,
  },
  [DpType.HasMetadata]: {
    what: 'Whether metadata is published for a req_id, without waiting.',
    request: reqIdOnlySchema,
    reply: hasMetadataResponseSchema,
  },
  [DpType.RegisterDestinations]: {
    what: "Register a receiver (SGLang's zmq_to_scheduler): the embedding is pushed to `receive_url` once staged.",
    request: registerRequestSchema,
    reply: '`null`',
  },
  [DpType.Send]: {
    what: "Deliver the staged embedding to `prefill_host:embedding_port`; answered after the receiver's ack.",
    request: sendRequestSchema,
    reply: sendReplySchema,
  },
  [DpType.SendStatus]: {
    what: "A request's phase and every destination's delivery state; 404 for an unknown req_id.",
    request: reqIdOnlySchema,
    reply: sendStatusSchema,
  },
  [DpType.Release]: {
    what: 'Free the staged embedding and its metadata (idempotent; deferred while an encode or send runs; a tombstone for an unknown req_id).',
    request: reqIdOnlySchema,
    reply: '`null`',
  },
  [DpType.HealthEncode]: {
    what: 'Run a tiny real encode (or report a recent batch while busy).',
    request: z.object({}),
    reply: '`{ok: true, latency_ms, source: "probe" | "recent-batch" | "dp", msg?}`',
  },
  [DpType.StartProfile]: {
    what: 'Start the V8 CPU profiler (needs the admin token in an `Authorization` header when EPD_ADMIN_TOKEN is set).',
    request: profileRequestSchema,
    reply: '`{ok, msg}`',
  },
  [DpType.StopProfile]: {
    what: 'Stop the profiler and write the profile (same token rule).',
    request: z.object({}),
    reply: '`{ok, msg, path?}`',
  },
};

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function typeOf(j: Json): string {
  if (j.const !== undefined) return JSON.stringify(j.const);
  if (j.enum) return j.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (j.anyOf) return [...new Set(j.anyOf.map(typeOf))].join(' | ');
  const t = Array.isArray(j.type) ? j.type.join(' | ') : j.type;
  if (t === 'array') return `${j.items ? typeOf(j.items) : 'any'}[]`;
  if (t === 'object' && j.properties) return 'object';
  if (t === 'integer' || t === 'number') {
    const max =
      j.maximum !== undefined && j.maximum < Number.MAX_SAFE_INTEGER ? j.maximum : undefined;
    const min =
      j.minimum !== undefined && j.minimum > Number.MIN_SAFE_INTEGER ? j.minimum : undefined;
    if (min !== undefined && max !== undefined) return `${t} ${min}..${max}`;
    if (min !== undefined) return `${t} ≥ ${min}`;
    return t;
  }
  return t ?? 'any';
}

function fields(schema: z.ZodType, io: 'input' | 'output'): string {
  const j = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
  const props = Object.entries(j.properties ?? {});
  if (props.length === 0) return '_(empty object)_\n';
  const required = new Set(j.required ?? []);
  const rows = props.map(
    ([name, p]) =>
      `| \`${name}\` | ${cell(typeOf(p))} | ${required.has(name) ? 'yes' : ''} | ${cell(p.description ?? '')} |`,
  );
  const extra =
    io === 'input' && j.additionalProperties !== false
      ? '\nOther fields are accepted and ignored (SGLang sends extras).\n'
      : '';
  return `| Field | Type | Required | Notes |\n|---|---|---|---|\n${rows.join('\n')}\n${extra}`;
}

/** docs/nats-reference.md, from the handlers' own zod schemas (`npm run docs`). */
export function natsDoc(): string {
  const sections = Object.entries(OPERATIONS).map(([dpType, op]) => {
    const reply = typeof op.reply === 'string' ? `${op.reply}\n` : fields(op.reply, 'output');
    return `## \`${dpType}\`

${op.what}

Request:

${fields(op.request, 'input')}
Reply:

${reply}`;
  });
  return `<!-- Generated by \`npm run docs\` from the handlers' zod schemas. Do not edit by hand. -->

# NATS subjects and payloads

Every call is a NATS request with a JSON payload; the reply is JSON. \`<prefix>\` is
\`EPD_SUBJECT_PREFIX\` (default \`epd\`).

| Subject | Who answers |
|---|---|
| \`<prefix>.v1.<dp_type>\` | any instance (queue group \`epd-encoder\`); per-req_id calls are routed to the owner |
| \`<prefix>.v1.rank.<N>.<dp_type>\` | DP worker N of some instance (queue group) |
| \`<prefix>.v1.inst.<id>.<dp_type>\` | one instance (owner routing forwards here) |
| \`<prefix>.v1.inst.<id>.rank.<N>.<dp_type>\` | DP worker N of one instance (its supervisor dispatches here) |
| \`<prefix>.v1.inst.<id>[.rank.<N>].cache_fetch\` | an encoding process serving cached rows to a joiner (binary stream; internal) |

Headers: \`traceparent\` (W3C trace context) is continued into the encoder's spans;
\`Authorization: Bearer <token>\` is checked by \`start_profile\` / \`stop_profile\`;
a \`deadline_ms\` or \`timeout_ms\` field bounds the work (the smaller of the two and
EPD_REQ_TIMEOUT_MS).

Errors are replied as:

${fields(errorBodySchema, 'output')}
The HTTP routes take the same bodies; their OpenAPI is served at \`/docs\`.

${sections.join('\n')}`;
}
