import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { buildAudioModel, buildVisionModel } from '../encoder/backend/reference-models';
import { referenceModelPaths } from '../encoder/backend/model-paths';

/**
 * Writes the deterministic reference models (fixed seed) unless they exist.
 * usage: generate-models [--force] [--dim N]
 */
function main(): void {
  const force = process.argv.includes('--force');
  const dimArg = process.argv.indexOf('--dim');
  const dim = dimArg > 0 ? Number(process.argv[dimArg + 1]) : 1024;
  if (!Number.isInteger(dim) || dim <= 0) throw new Error('--dim must be a positive integer');
  const paths = referenceModelPaths();
  for (const [path, build] of [
    [paths.vision, () => buildVisionModel(dim)],
    [paths.audio, () => buildAudioModel(dim)],
  ] as const) {
    if (existsSync(path) && !force) continue;
    mkdirSync(dirname(path), { recursive: true });
    const bytes = build();
    writeFileSync(`${path}.tmp`, bytes);
    renameSync(`${path}.tmp`, path);
    const sha = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
    process.stdout.write(`wrote ${path} (${bytes.length} bytes, sha256 ${sha}…)\n`);
  }
}

main();
