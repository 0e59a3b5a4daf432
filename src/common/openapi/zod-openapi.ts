import { ApiBody } from '@nestjs/swagger';
import { z } from 'zod';

type SchemaObject = Extract<Parameters<typeof ApiBody>[0], { schema: unknown }>['schema'];

/** OpenAPI schema from the zod schema that also validates the message: one source of truth. */
export function openApiSchema(schema: z.ZodType): SchemaObject {
  const { $schema: _drop, ...json } = z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'any',
  });
  return json as SchemaObject;
}
