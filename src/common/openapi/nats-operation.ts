import { SetMetadata, type INestApplicationContext } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { PATTERN_METADATA } from '@nestjs/microservices/constants';
import type { z } from 'zod';

/** What docs/nats-reference.md says of one dp_type, written beside its handler. */
export interface NatsOperationDoc {
  what: string;
  /** The schema its payload pipe validates with. */
  request: z.ZodType;
  /** The reply's schema, or its literal shape in words. */
  reply: z.ZodType | string;
}

const NATS_OPERATION = 'epd:nats-operation';

/** Documents a @MessagePattern handler for docs/nats-reference.md (`npm run docs`). */
export const NatsOperation = (doc: NatsOperationDoc) => SetMetadata(NATS_OPERATION, doc);

/** Every documented @MessagePattern handler of an app, by its pattern. */
export function natsOperations(app: INestApplicationContext): Map<string, NatsOperationDoc> {
  const found = new Map<string, NatsOperationDoc>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const proto = (wrapper.metatype as { prototype?: object } | null)?.prototype;
      if (!proto) continue;
      for (const name of Object.getOwnPropertyNames(proto)) {
        const handler = (proto as Record<string, unknown>)[name];
        if (typeof handler !== 'function') continue;
        const patterns = Reflect.getMetadata(PATTERN_METADATA, handler) as unknown[] | undefined;
        const doc = Reflect.getMetadata(NATS_OPERATION, handler) as NatsOperationDoc | undefined;
        for (const pattern of patterns ?? []) {
          if (typeof pattern === 'string' && doc) found.set(pattern, doc);
        }
      }
    }
  }
  return found;
}
