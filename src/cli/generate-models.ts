import { ensureReferenceModels } from './models/generate-models';

/**
 * Writes the deterministic reference models (fixed seed) unless they exist.
 * usage: generate-models [--force] [--dim N]
 */
function main(): void {
  const force = process.argv.includes('--force');
  const dimArg = process.argv.indexOf('--dim');
  const dim = dimArg > 0 ? Number(process.argv[dimArg + 1]) : 1024;
  if (!Number.isInteger(dim) || dim <= 0) throw new Error('--dim must be a positive integer');
  for (const m of ensureReferenceModels({ force, dim })) {
    process.stdout.write(
      m.written
        ? `wrote ${m.path} (${m.bytes} bytes, sha256 ${m.sha256.slice(0, 16)}…)\n`
        : `kept ${m.path}\n`,
    );
  }
}

main();
