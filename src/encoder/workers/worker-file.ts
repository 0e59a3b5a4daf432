import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { projectRoot } from '../../common/fs/project-root';

/**
 * The compiled JS of worker module `base` that sits in `dir`. Worker threads load plain
 * JS, so when this code runs from TypeScript sources (jest) the file comes from `dist/`
 * (built by `npm test` before the suites run).
 */
export function workerFile(dir: string, base: string): string {
  const local = join(dir, `${base}.js`);
  if (existsSync(local)) return local;
  const root = projectRoot();
  const built = join(root, 'dist', relative(join(root, 'src'), dir), `${base}.js`);
  if (!existsSync(built)) throw new Error(`worker ${built} is missing: run "npm run build" first`);
  return built;
}
