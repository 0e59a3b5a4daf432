import { parseArgs } from 'node:util';
import { ensureReferenceModelDirs, ensureReferenceModels } from './models/generate-models';

const USAGE = `usage: generate-models [--force] [--dim N]
Writes the deterministic reference models (fixed seed) into models/, unless they exist,
and each family's reference model directory (models/<name>/, EPD_MODEL_DIR's layout).
  --force   rewrite them even if they exist
  --dim N   output width of the vision model (default 1024)`;

function main(): void {
  const { values } = parseArgs({
    options: {
      force: { type: 'boolean', default: false },
      dim: { type: 'string', default: '1024' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const dim = Number(values.dim);
  if (!Number.isInteger(dim) || dim <= 0) throw new Error('--dim must be a positive integer');
  for (const m of [
    ...ensureReferenceModels({ force: values.force, dim }),
    ...ensureReferenceModelDirs({ force: values.force }),
  ]) {
    process.stdout.write(
      m.written
        ? `wrote ${m.path} (${m.bytes} bytes, sha256 ${m.sha256.slice(0, 16)}…)\n`
        : `kept ${m.path}\n`,
    );
  }
}

main();
