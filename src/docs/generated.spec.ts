import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../common/fs/project-root';
import { configKeys } from './config-doc';
import { GENERATED_DOCS } from './generated';

describe('generated docs', () => {
  it.each(Object.keys(GENERATED_DOCS))('%s matches its source (run `npm run docs`)', (file) => {
    const onDisk = readFileSync(join(projectRoot(), file), 'utf8');
    expect(onDisk).toBe(GENERATED_DOCS[file]!());
  });

  it('describes every configuration key', () => {
    const undocumented = configKeys()
      .filter((k) => k.description.length < 8)
      .map((k) => k.env ?? k.key);
    expect(undocumented).toEqual([]);
  });
});
