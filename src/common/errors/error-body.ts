import { z } from 'zod';
import { ERROR_TYPES } from './error-types.doc';
import type { MMError } from './mm-error';

/**
 * The wire shape of every error, HTTP body and NATS `err` alike (docs/contract.md §3).
 * Apart from mm-error.ts, which the worker threads load: zod in the inference thread's heap
 * cost about 9 core-ms per 1024x768 encode (.dependency-cruiser.cjs keeps it out).
 */
export const errorBodySchema = z.object({
  status: z.literal('error'),
  code: z.number().int(),
  type: z.enum(ERROR_TYPES).describe('stable machine-readable key; listed in docs/errors.md'),
  message: z.string(),
  req_id: z.string().nullable(),
});

export type ErrorBody = z.infer<typeof errorBodySchema>;

export function toErrorBody(err: MMError, reqId?: string): ErrorBody {
  return {
    status: 'error',
    code: err.code,
    type: err.type,
    message: err.message,
    req_id: err.reqId ?? reqId ?? null,
  };
}

export function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  // `type` is not required here: replies from encoders older than it still parse.
  return v.status === 'error' && typeof v.code === 'number' && typeof v.message === 'string';
}
