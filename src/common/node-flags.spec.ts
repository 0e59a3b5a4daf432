import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { missingServiceFlags, SERVICE_ENV, SERVICE_NODE_FLAGS } from './node-flags';

const ROOT = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

describe('SERVICE_NODE_FLAGS', () => {
  it('every launcher of the service passes them, in this order, before dist/main.js', () => {
    const flags = SERVICE_NODE_FLAGS.join(' ');
    expect(read('scripts/start.sh')).toContain(`node ${flags} dist/main.js`);
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start:prod']).toMatch(new RegExp(`(^| )node ${flags} dist/main\\.js$`));
    const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1];
    expect(JSON.parse(cmd ?? '[]')).toEqual(['node', ...SERVICE_NODE_FLAGS, 'dist/main.js']);
  });

  it('SERVICE_ENV is set by every launcher, unless the caller set it already', () => {
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    const start = read('scripts/start.sh');
    const docker = read('Dockerfile');
    for (const [name, value] of Object.entries(SERVICE_ENV)) {
      expect(start).toContain(`export ${name}="\${${name}:-${value}}"`);
      expect(pkg.scripts['start:prod']).toContain(`${name}=\${${name}:-${value}} `);
      expect(docker).toMatch(new RegExp(`^\\s*${name}=${value}\\b`, 'm'));
    }
  });

  it('are missing unless on the command line or in NODE_OPTIONS, whatever their value or spelling', () => {
    expect(missingServiceFlags([], '')).toEqual([...SERVICE_NODE_FLAGS]);
    expect(missingServiceFlags(['--max-semi-space-size=64'], '')).toEqual([]);
    expect(missingServiceFlags(['--max-semi-space-size=128'], '')).toEqual([]);
    expect(missingServiceFlags(['--max_semi_space_size=32'], '')).toEqual([]);
    expect(missingServiceFlags([], '--inspect  --max-semi-space-size=64')).toEqual([]);
    expect(missingServiceFlags(['--max-old-space-size=64'], '--semi-space')).toEqual([
      '--max-semi-space-size=64',
    ]);
  });
});
