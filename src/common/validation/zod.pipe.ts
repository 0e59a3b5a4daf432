import { Injectable, type PipeTransform } from '@nestjs/common';
import type { z } from 'zod';
import { Errors } from '../errors/error-catalogue';
import { MMError } from '../errors/mm-error';
import { reqIdOf } from '../req-id';
import { assertJsonDepth } from './json-depth';

/**
 * What the NATS deserializer hands over when the raw message could not become a payload
 * (not JSON, too large). The pipe turns it into the matching 400/413, so that bad bytes
 * travel the same path as bad fields and are answered by the one filter.
 */
export class RejectedPayload {
  constructor(readonly error: MMError) {}
}

export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`)
    .join('; ');
}

/** Validates and types one message with its zod schema (HTTP bodies and NATS data alike). */
@Injectable()
export class ZodPipe<S extends z.ZodType> implements PipeTransform<unknown, z.infer<S>> {
  constructor(
    private readonly schema: S,
    private readonly what: string,
  ) {}

  transform(value: unknown): z.infer<S> {
    if (value instanceof RejectedPayload) throw value.error;
    assertJsonDepth(value);
    const result = this.schema.safeParse(value);
    if (result.success) return result.data;
    throw Errors.invalidField(this.what, describeIssues(result.error), reqIdOf(value));
  }
}
