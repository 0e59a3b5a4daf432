import { z } from 'zod';

/**
 * SGLang's /start_profile body is a pydantic model, so FastAPI coerces in "lax" mode:
 * `null` means absent, numeric strings become integers, and "true"/"1"/"yes"/"on" (and
 * their opposites) become booleans. The same bodies are accepted here, with the same
 * results; anything else is still a 400 that names the field.
 */
const absentIfNull = (v: unknown) => (v === null ? undefined : v);

const laxInt = z.preprocess(
  (v) => (typeof v === 'string' && /^\s*[+-]?\d+\s*$/.test(v) ? Number(v) : absentIfNull(v)),
  z.number().int().positive().optional(),
);

const TRUE = new Set(['true', '1', 'yes', 'on', 't', 'y']);
const FALSE = new Set(['false', '0', 'no', 'off', 'f', 'n']);
const laxBool = z.preprocess((v) => {
  if (typeof v === 'string') {
    const s = v.trim().toLowerCase();
    if (TRUE.has(s)) return true;
    if (FALSE.has(s)) return false;
  }
  if (v === 0 || v === 1) return v === 1;
  return absentIfNull(v);
}, z.boolean().optional());

const optional = <T extends z.ZodType>(schema: T) => z.preprocess(absentIfNull, schema.optional());

export const profileRequestSchema = z
  .object({
    output_dir: optional(z.string().min(1)),
    profile_prefix: optional(z.string().min(1).max(100)),
    num_steps: laxInt,
    // SGLang's torch-profiler options, accepted for compatibility; V8 profiles are CPU only.
    activities: optional(z.array(z.string())),
    with_stack: laxBool,
    record_shapes: laxBool,
  })
  .default({});

/** A start_profile request, as validated (the schema is the one source of its type). */
export type ProfileRequest = z.output<typeof profileRequestSchema>;
