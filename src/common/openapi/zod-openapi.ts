import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiResponse } from '@nestjs/swagger';
import { z } from 'zod';
import { errorBodySchema } from '../errors/error-body';

type SchemaObject = Extract<Parameters<typeof ApiBody>[0], { schema: unknown }>['schema'];

/**
 * OpenAPI schema from the zod schema that also validates the message (`input`) or shapes
 * the reply (`output`): one source of truth.
 */
export function openApiSchema(schema: z.ZodType, io: 'input' | 'output' = 'input'): SchemaObject {
  const { $schema: _drop, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return json as SchemaObject;
}

export { errorBodySchema } from '../errors/error-body';

/** Documents a route's success reply and the error statuses it can answer. */
export function ApiReplies(ok: z.ZodType, ...errorStatuses: number[]): MethodDecorator {
  const error = openApiSchema(errorBodySchema, 'output');
  return applyDecorators(
    ApiResponse({ status: 200, schema: openApiSchema(ok, 'output') }),
    ...errorStatuses.map((status) => ApiResponse({ status, schema: error })),
  );
}
