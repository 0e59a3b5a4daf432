import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './common/fs/project-root';

const ROOT = projectRoot();
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** Licenses a production dependency may carry (SPDX expressions as package-lock.json has them). */
const PERMISSIVE = new Set([
  'MIT',
  'ISC',
  'Apache-2.0',
  'BSD-2-Clause',
  'BSD-3-Clause',
  '0BSD',
  'Unlicense',
  'Python-2.0',
  '(MIT OR CC0-1.0)',
  'MIT AND MPL-2.0',
]);
/** LGPL components, used unmodified as separate libraries (NOTICE): only these. */
const LGPL =
  /^(@img\/sharp-libvips-[\w-]+|@img\/sharp-wasm32|@img\/sharp-win32-[\w-]+|codec-parser)$/;
/** Packages whose lockfile entry lacks the field (their package.json says MIT). */
const UNDECLARED_MIT = new Set(['busboy', 'streamsearch']);

describe('project basics', () => {
  it('is Apache-2.0: LICENSE holds the license, package.json says so', () => {
    expect(read('LICENSE')).toMatch(/^Apache License\nVersion 2\.0, January 2004/);
    expect((JSON.parse(read('package.json')) as { license: string }).license).toBe('Apache-2.0');
  });

  it('every production dependency carries a license compatible with it', () => {
    const lock = JSON.parse(read('package-lock.json')) as {
      packages: Record<string, { dev?: boolean; license?: string }>;
    };
    const refused: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (!path || entry.dev) continue;
      const name = path.replace(/^.*node_modules\//, '');
      const license = entry.license ?? '';
      if (PERMISSIVE.has(license)) continue;
      if (license.includes('LGPL-3.0-or-later') && LGPL.test(name)) continue;
      if (!license && UNDECLARED_MIT.has(name)) continue;
      refused.push(`${name}: ${license || '(none declared)'}`);
    }
    expect(refused).toEqual([]);
  });

  it("the CHANGELOG has a section for package.json's version", () => {
    const { version } = JSON.parse(read('package.json')) as { version: string };
    expect(read('CHANGELOG.md')).toMatch(
      new RegExp(`^## .*\\b${version.replace(/\./g, '\\.')}\\b`, 'm'),
    );
  });
});
