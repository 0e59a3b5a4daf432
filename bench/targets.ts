import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RESULTS_DIR } from './common';
import { targetsTable } from './targets-table';

/** Writes targets.md beside the results it reads (bench/results/, or quick/ with --quick). */
writeFileSync(join(RESULTS_DIR, 'targets.md'), targetsTable(RESULTS_DIR));
process.stdout.write(`wrote ${join(RESULTS_DIR, 'targets.md')}\n`);
