import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

let cached: string | undefined;

/**
 * The project root: the nearest directory above this file with both `package.json` and
 * `config/default.yaml`, so it is found the same way from src/ (jest, ts-node), dist/ and
 * any other build output directory. Falls back to the working directory.
 */
export function projectRoot(): string {
  if (cached) return cached;
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'config', 'default.yaml')))
      return (cached = dir);
    if (dirname(dir) === dir) return (cached = process.cwd());
  }
}
