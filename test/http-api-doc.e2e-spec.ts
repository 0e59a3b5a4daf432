import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiDocument } from '../src/bootstrap';
import { HTTP_API_DOC, httpApiDoc } from '../src/docs/http-api-doc';
import { startTestApp, type TestApp } from './support/app';

/** docs/http-api.md is the running app's own OpenAPI document, rendered (`npm run docs`). */
describe('the HTTP API page (e2e)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  it('matches the OpenAPI document the running service serves (run `npm run docs`)', async () => {
    const served = (await (await fetch(`${t.httpUrl}/docs-json`)).json()) as ReturnType<
      typeof openApiDocument
    >;
    const page = readFileSync(join(__dirname, '..', HTTP_API_DOC), 'utf8');
    expect(page).toBe(httpApiDoc(served));
    expect(httpApiDoc(openApiDocument(t.app))).toBe(page);
  });
});
