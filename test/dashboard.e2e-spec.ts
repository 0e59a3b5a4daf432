import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import request from 'supertest';
import { DashboardService } from '../src/metrics/dashboard/dashboard.service';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall, waitFor } from './support/calls';
import { dataUri, image } from './support/media';

const TOKEN = 'dashboard-test-token-0123456789abcdef';
const ARTIFACTS = join(__dirname, 'artifacts');

/** Debian's chromium (the test script installs it), or EPD_CHROMIUM. */
function chromium(): string {
  const found = [process.env.EPD_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
    (p): p is string => !!p && existsSync(p),
  );
  if (!found)
    throw new Error('chromium is missing: run the tests through npm test, which installs it');
  return found;
}

describe('live admin dashboard in headless Chromium (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let browser: Browser;
  let page: Page;

  // Page code as strings: this project's TypeScript has no DOM library.
  const read = (expression: string) => page.evaluate(expression) as Promise<string>;
  const text = (id: string) => read(`document.getElementById(${JSON.stringify(id)}).textContent`);

  beforeAll(async () => {
    t = await startTestApp({ EPD_ADMIN_TOKEN: TOKEN });
    nc = await connect({ servers: sharedNatsUrl() });
    browser = await puppeteer.launch({
      executablePath: chromium(),
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1000 });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await nc?.close();
    await t?.close();
  });

  it('refuses the event stream without the token, and never takes the token from a URL', async () => {
    expect((await request(t.httpUrl).get('/admin/events')).status).toBe(401);
    expect((await request(t.httpUrl).get(`/admin/events?token=${TOKEN}`)).status).toBe(401);
    expect((await request(t.httpUrl).post('/admin/login').send({ token: 'wrong' })).status).toBe(
      401,
    );
    // The token itself as the cookie (what the sign-in used to set) opens nothing.
    const cookie = `epd_admin_token=${TOKEN}`;
    expect((await request(t.httpUrl).get('/admin/status').set('Cookie', cookie)).status).toBe(401);
  });

  it('signs in through the form, then shows numbers that move under traffic', async () => {
    await page.goto(`${t.httpUrl}/admin/ui`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    await page.type('#token', 'not-it');
    await page.click('button[type=submit]');
    await page.waitForFunction("document.getElementById('error').textContent !== ''");
    await read("document.getElementById('token').value = ''");
    await page.type('#token', TOKEN);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect(new URL(page.url()).pathname).toBe('/admin/ui');
    expect(page.url()).not.toContain(TOKEN);
    await page.waitForFunction("document.getElementById('status').textContent === 'live'", {
      timeout: 10_000,
    });
    const before = { encodes: await text('encodes-total'), waits: await text('waits-total') };

    // Traffic: encodes, waits answered, and waits that reach their deadline (504).
    const item = dataUri(await image(112, 84, 'png'), 'image/png');
    const meta = { embedding_size: 8, embedding_len: 2, embedding_dim: 1 };
    for (let i = 0; i < 6; i++) {
      const id = `dash-${i}`;
      await natsCall(nc, t, 'encode', encodeBody(id, [item]));
      await natsCall(nc, t, 'publish_metadata', { req_id: `${id}-m`, metadata: meta });
      await natsCall(nc, t, 'wait_metadata', { req_id: `${id}-m` });
      await natsCall(nc, t, 'wait_metadata', { req_id: `${id}-never`, timeout_ms: 50 });
    }
    // The page shows the numbers of its latest event, which may have been taken while the
    // traffic was still going (CI saw 6 encodes with 5 waits answered): wait for all of it.
    await page
      .waitForFunction(
        `(() => {
        const [ok, timeouts] = document.getElementById('waits-total').textContent.split(' / ').map(Number);
        return Number(document.getElementById('encodes-total').textContent) >= 6 && ok >= 6 && timeouts >= 6;
      })()`,
        { timeout: 10_000 },
      )
      .catch(() => undefined); // the assertions below name what is missing
    expect(await text('encodes-total')).not.toBe(before.encodes);
    expect(Number(await text('encodes-total'))).toBeGreaterThanOrEqual(6);
    expect(await text('waits-total')).not.toBe(before.waits);
    const [ok, timeouts] = (await text('waits-total')).split(' / ').map(Number);
    expect(ok).toBeGreaterThanOrEqual(6);
    expect(timeouts).toBeGreaterThanOrEqual(6);
    // The 504s are listed by type, the one rank and this instance have rows.
    await page.waitForFunction(
      "document.querySelector('#errors tbody').textContent.includes('metadata_not_ready')",
      { timeout: 10_000 },
    );
    expect(await read("document.querySelectorAll('#ranks tbody tr').length")).toBe(1);
    expect(await read("document.querySelector('#instances tbody').textContent")).toContain(
      '(this)',
    );
    // The autoscaling signal: encoders wanted over live ones (this one alone here).
    expect(await text('desired-replicas')).toMatch(/^\d+ \/ 1$/);
    // The charts drew (uPlot renders into canvases).
    expect(await read("document.querySelectorAll('canvas').length")).toBeGreaterThanOrEqual(4);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });

    // At every width from a laptop's to a wide screen, no table runs out of its card into
    // the next one (at 1400 px the ranks table's last column ran into the instances table).
    for (const width of [1024, 1280, 1400, 1600, 1920]) {
      await page.setViewport({ width, height: 1000 });
      const overlaps = (await page.evaluate(`(() => {
        const cards = [...document.querySelectorAll('.tables > section')];
        const out = [];
        for (const c of cards) {
          const box = c.getBoundingClientRect();
          for (const el of c.querySelectorAll('table, th, td')) {
            const r = el.getBoundingClientRect();
            if (r.right > box.right + 0.5 || r.left < box.left - 0.5)
              out.push(c.querySelector('h2').textContent + ': ' + el.tagName + ' ' + Math.round(r.left) + '-' + Math.round(r.right) + ' outside ' + Math.round(box.left) + '-' + Math.round(box.right));
          }
        }
        for (let i = 0; i < cards.length; i++)
          for (let j = i + 1; j < cards.length; j++) {
            const a = cards[i].getBoundingClientRect(), b = cards[j].getBoundingClientRect();
            if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
              out.push('cards ' + i + ' and ' + j + ' overlap');
          }
        return out;
      })()`)) as string[];
      expect({ width, overlaps }).toEqual({ width, overlaps: [] });
    }
    await page.setViewport({ width: 1280, height: 1000 });
  }, 60_000);

  it('drains its event streams when the page goes away', async () => {
    const dashboard = t.app.get(DashboardService);
    expect(dashboard.openStreams).toBeGreaterThanOrEqual(1);
    await page.close();
    expect(await waitFor(() => dashboard.openStreams === 0, 5000)).toBe(true);
  });
});
