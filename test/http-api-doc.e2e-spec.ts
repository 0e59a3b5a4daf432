import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiDocument } from '../src/bootstrap';
import { HTTP_API_DOC, httpApiDoc } from '../src/docs/http-api-doc';
import { NATS_DOC, natsDoc } from '../src/docs/nats-doc';
import { natsOperations } from '../src/common/openapi/nats-operation';
import { startTestApp, type TestApp } from './support/app';

/**
 * docs/http-api.md is the running app's own OpenAPI document, and docs/nats-reference.md
 * what its NATS handlers document, rendered (`npm run docs`).
 */
describe('the HTTP and NATS reference pages (e2e)', () => {
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

  it("docs/nats-reference.md is what the running app's NATS handlers document (run `npm run docs`)", () => {
    const page = readFileSync(join(__dirname, '..', NATS_DOC), 'utf8');
    expect(natsDoc(natsOperations(t.app))).toBe(page);
  });

  it('every dp_type is documented by its handler: one without fails the page, naming it', () => {
    const some = natsOperations(t.app);
    some.delete('release');
    expect(() => natsDoc(some)).toThrow(/no @NatsOperation handler documents: release/);
  });
});
