import { z } from 'zod';

export const profileRequestSchema = z
  .object({
    output_dir: z.string().min(1).optional(),
    profile_prefix: z.string().min(1).max(100).optional(),
    num_steps: z.number().int().positive().optional(),
    // SGLang's torch-profiler options, accepted for compatibility; V8 profiles are CPU only.
    activities: z.array(z.string()).optional(),
    with_stack: z.boolean().optional(),
    record_shapes: z.boolean().optional(),
  })
  .default({});

/** A start_profile request, as validated (the schema is the one source of its type). */
export type ProfileRequest = z.output<typeof profileRequestSchema>;
