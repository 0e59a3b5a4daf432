import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiResponse } from '@nestjs/swagger';
import { z } from 'zod';

type SchemaObject = Extract<Parameters<typeof ApiBody>[0], { schema: unknown }>['schema'];

/**
 * OpenAPI schema from the zod schema that also validates the message (`input`) or shapes
 * the reply (`output`): one source of truth.
 */
export function openApiSchema(schema: z.ZodType, io: 'input' | 'output' = 'input'): SchemaObject {
  const { $schema: _drop, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return json as SchemaObject;
}

/** The error body of every route and subject (docs/contract.md §3). */
export const errorBodySchema = z.object({
  status: z.literal('error'),
  code: z.number().int(),
  type: z.string().describe('stable machine-readable key; listed in docs/errors.md'),
  message: z.string(),
  req_id: z.string().nullable(),
});

/** Documents a route's success reply and the error statuses it can answer. */
export function ApiReplies(ok: z.ZodType, ...errorStatuses: number[]): MethodDecorator {
  const error = openApiSchema(errorBodySchema, 'output');
  return applyDecorators(
    ApiResponse({ status: 200, schema: openApiSchema(ok, 'output') }),
    ...errorStatuses.map((status) => ApiResponse({ status, schema: error })),
  );
}
