import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The repository's root: the nearest directory above this file with a package.json. The
 * same from test/support (jest) and from dist-bench/test/support (the compiled benches).
 */
export const REPO_ROOT = ((): string => {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${__dirname}`);
    dir = up;
  }
  return dir;
})();
