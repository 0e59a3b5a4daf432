import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Errors } from './error-catalogue';
import { typeForStatus, type MMError } from './mm-error';
import { ERROR_TYPE_DOCS } from './error-types.doc';
import { FALLBACK_STATUSES } from '../../docs/errors-doc';

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

  it('describes every type the catalogue mints, read from its source (allErrors() missed three)', () => {
    const source = readFileSync(join(__dirname, 'error-catalogue.ts'), 'utf8');
    const minted = new Set(
      [...source.matchAll(/,\s*'([a-z]+(?:_[a-z]+)*)',?\s*\)/g)].map((m) => m[1]!),
    );
    const described = new Set<string>(ERROR_TYPE_DOCS.flatMap((e) => e.types));
    expect(minted.size).toBeGreaterThan(40);
    expect([...minted].filter((t) => !described.has(t))).toEqual([]);
    // Each type is described once.
    const all = ERROR_TYPE_DOCS.flatMap((e) => e.types as readonly string[]);
    expect(all.filter((t, i) => all.indexOf(t) !== i)).toEqual([]);
  });

  it('describes every type in docs/errors.md, so clients can rely on the table', () => {
    const page = readFileSync(join(__dirname, '../../../docs/errors.md'), 'utf8');
    const described = new Set<string>(ERROR_TYPE_DOCS.flatMap((e) => e.types));
    const types = new Set([
      ...allErrors().map((e) => e.type),
      ...FALLBACK_STATUSES.map(typeForStatus),
    ]);
    for (const type of types) {
      if (FALLBACK_STATUSES.map(typeForStatus).includes(type)) {
        expect(page).toContain(`\`${type}\``);
        continue;
      }
      expect({ type, described: described.has(type) }).toEqual({ type, described: true });
      expect(page).toContain(`\`${type}\``);
    }
  });
});
