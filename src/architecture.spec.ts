import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');
const depcruise = (cwd: string, args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'node_modules/.bin/depcruise'), ...args], {
    cwd,
    encoding: 'utf8',
  });

/**
 * The module boundaries of .dependency-cruiser.cjs (run by `npm run lint`) hold for src/,
 * and a forbidden import does fail them: test/fixtures/boundaries has transport/ importing
 * a feature and the SDK importing Nest.
 */
describe('module boundaries', () => {
  it('src/ has no violation', () => {
    const r = depcruise(ROOT, ['src', '--config', '.dependency-cruiser.cjs']);
    expect(r.stdout).toContain('no dependency violations found');
    expect(r.status).toBe(0);
  });

  it('a forbidden import fails, naming the rule', () => {
    const r = depcruise(join(ROOT, 'test/fixtures/boundaries'), [
      'src',
      '--config',
      join(ROOT, '.dependency-cruiser.cjs'),
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stdout).toMatch(/transport-imports-no-feature: src\/transport\/bad\.ts/);
    expect(r.stdout).toMatch(/client-imports-no-nest: src\/client\/bad\.ts/);
  });
});
