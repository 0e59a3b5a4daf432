#!/usr/bin/env node
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../app.module';
import { openApiDocument } from '../bootstrap';
import { projectRoot } from '../common/fs/project-root';
import { loadConfig } from '../config/config.loader';
import { GENERATED_DOCS } from '../docs/generated';
import { HTTP_API_DOC, httpApiDoc } from '../docs/http-api-doc';
import { NATS_DOC, natsDoc } from '../docs/nats-doc';
import { natsOperations } from '../common/openapi/nats-operation';

/**
 * docs/http-api.md and docs/nats-reference.md: what the handlers of an app built from the
 * embedded defaults and never started (no listener, no NATS connection) say of
 * themselves, its OpenAPI document and its @NatsOperation handlers, rendered as pages.
 */
async function appPages(): Promise<Record<string, string>> {
  // Never started: the stand-in models only let it be built.
  const { config } = loadConfig({ EPD_ALLOW_REFERENCE_MODEL: 'true' });
  const app = await NestFactory.create(AppModule.withConfig(config), {
    logger: false,
    bodyParser: false,
    abortOnError: false,
  });
  try {
    return {
      [HTTP_API_DOC]: httpApiDoc(openApiDocument(app)),
      [NATS_DOC]: natsDoc(natsOperations(app)),
    };
  } finally {
    await app.close();
  }
}

/**
 * `npm run docs`: writes the generated reference pages under docs/. `--check` writes
 * nothing and exits 1 naming every page that is stale.
 */
async function main(): Promise<number> {
  const check = process.argv.includes('--check');
  const pages: Record<string, string> = await appPages();
  for (const [file, render] of Object.entries(GENERATED_DOCS)) pages[file] = render();
  const stale: string[] = [];
  for (const [file, text] of Object.entries(pages)) {
    const path = join(projectRoot(), file);
    let current = '';
    try {
      current = readFileSync(path, 'utf8');
    } catch {
      // missing: stale
    }
    if (current === text) continue;
    stale.push(file);
    if (!check) writeFileSync(path, text);
  }
  if (check && stale.length > 0) {
    process.stderr.write(`stale (run npm run docs): ${stale.join(', ')}\n`);
    return 1;
  }
  if (!check)
    process.stdout.write(stale.length ? `wrote ${stale.join(', ')}\n` : 'docs up to date\n');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
