import { waitFor } from './support/wait';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

const TOKEN = 'n5-admin-token-0123456789abcdef0123';

/**
 * N5 (security, second pass), admin-path-500: `/admin/registry/%zz` answered 500 without a
 * token and logged a ~900-byte error line with a stack each time, because the logging
 * middleware decoded the path (to log its req_id) before the admin guard ran. A path that
 * does not decode is a 400 that names it, with or without a token, and logs no error or
 * stack: an unauthenticated caller cannot amplify it into the logs.
 */
describe('N5: a malformed percent-encoding in an admin path (e2e, built service)', () => {
  let svc: ServiceProcess;
  beforeAll(async () => {
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_ADMIN_TOKEN: TOKEN,
      EPD_LOG_LEVEL: 'info',
      EPD_LOG_FORMAT: 'json',
    });
  });
  afterAll(async () => {
    await svc.stop();
  });

  it.each([
    ['without a token', {}],
    ['with the admin token', { authorization: `Bearer ${TOKEN}` }],
  ])('%s: 400 naming the path, and no error or stack logged', async (_name, headers) => {
    const before = svc.output().length;
    const res = await fetch(`${svc.url}/admin/registry/%zz`, { headers });
    const body = (await res.json()) as { code: number; type: string; message: string };
    expect({ status: res.status, type: body.type }).toEqual({
      status: 400,
      type: 'invalid_request',
    });
    expect(body.message).toMatch(/%zz/);
    // The request's own log line is written once it is answered: everything it caused is out.
    await waitFor(() => svc.output().slice(before).includes('%zz'));
    const lines = svc.output().slice(before).split('\n').filter(Boolean);
    const errors = lines.filter((l) => /URIError|"stack"|"level":50|\bat [\w.<>]+ \(/.test(l));
    expect(errors).toEqual([]);
  });
});
