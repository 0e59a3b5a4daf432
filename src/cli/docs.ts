#!/usr/bin/env node
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../common/fs/project-root';
import { GENERATED_DOCS } from '../docs/generated';

/**
 * `npm run docs`: writes the generated reference pages under docs/. `--check` writes
 * nothing and exits 1 naming every page that is stale.
 */
function main(): number {
  const check = process.argv.includes('--check');
  const stale: string[] = [];
  for (const [file, render] of Object.entries(GENERATED_DOCS)) {
    const path = join(projectRoot(), file);
    const text = render();
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

process.exitCode = main();
