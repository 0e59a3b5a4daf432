import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Errors } from './error-catalogue';
import { typeForStatus, type MMError } from './mm-error';

/** Every catalogue entry, called with placeholder arguments. */
function allErrors(): MMError[] {
  return Object.values(Errors).map((make) =>
    (make as (...args: unknown[]) => MMError)('x', 1, 2, 'VAR', 'r'),
  );
}

describe('error catalogue', () => {
  it('gives every error a stable snake_case type', () => {
    for (const err of allErrors()) expect(err.type).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });

  it('falls back to a type per HTTP status', () => {
    expect(typeForStatus(504)).toBe('timeout');
    expect(typeForStatus(418)).toBe('invalid_request');
    expect(typeForStatus(599)).toBe('internal');
  });

  it('lists every type in the README, so clients can rely on the table', () => {
    const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Error types'));
    const types = new Set([
      ...allErrors().map((e) => e.type),
      ...[400, 401, 404, 409, 413, 500, 503, 504].map(typeForStatus),
    ]);
    for (const type of types) expect(section).toContain(`\`${type}\``);
  });
});
