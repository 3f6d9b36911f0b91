// console_browser.mjs - drives the admin console in Debian's chromium with
// playwright-core (test_console.py starts the gateway and reads the JSON
// this prints). One argument: a JSON object {admin, chromium, shots,
// wrongKey, readKey (no admin service), viewKey (admin-read), adminKey,
// sweeps, mark}: once the page has its first sample it creates mark.loaded
// and waits for mark.go (the test's vendor calls are made in between). Prints one JSON object: what each
// panel shows, what happened at each step, the console errors and every
// request the page made.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.TG_NPM_DIR, 'node_modules', 'x.js'));
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2]);
const out = { errors: [], requests: [], steps: {} };
let step = 'load';    // errors are told by step: refusals are expected before the admin key
const browser = await chromium.launch({ executablePath: cfg.chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu'] });
const T = 20000;

// What the panels show, read from the DOM (text only, as a reader sees it).
async function panels(page) {
  return page.evaluate(() => {
    const rows = (id) => [...document.querySelectorAll('#' + id + ' tbody tr')].map((tr) =>
      [...tr.cells].map((td) => td.textContent));
    const figs = {};
    for (const dd of document.querySelectorAll('[data-figure]')) figs[dd.dataset.figure] = dd.textContent;
    const sweeps = [...document.querySelectorAll('#sweeps .sweep')].map((s) => ({
      id: s.dataset.sweep,
      rows: [...s.querySelectorAll('tbody tr')].map((tr) => [...tr.cells].map((td) => td.textContent)),
      series: [...s.querySelectorAll('svg.sweep-chart polyline.series')].map((p) => ({
        name: p.dataset.series, points: p.getAttribute('points').split(' ').filter(Boolean).length })),
    }));
    return {
      saved: document.getElementById('saved-total').textContent,
      calls: document.getElementById('calls-total').textContent,
      figures: figs,
      services: rows('services-table'), origins: rows('origins-table'), polls: rows('polls-table'),
      dead: rows('dead-table'), latest: rows('latest-table'), runs: rows('runs-table'),
      limits: rows('limits-table'), sweeps: sweeps,
      fleet: rows('fleet-table'), egressAllow: rows('egress-allow-table'), egressRefused: rows('egress-refused-table'),
      callSeries: document.querySelectorAll('#chart-calls polyline.series').length,
      vendorSeries: [...document.querySelectorAll('#chart-vendor-latency polyline.series')]
        .map((p) => ({ name: p.dataset.series,
          points: p.getAttribute('points').split(' ').filter(Boolean).length })),
      vendorLegend: document.getElementById('legend-vendor-latency').textContent,
      buttons: [...document.querySelectorAll('button[data-webhook]')].map((b) => ({
        id: b.dataset.webhook, disabled: b.disabled })),
      auth: document.getElementById('auth-message').textContent,
      markup: document.querySelectorAll('main img, main b').length,
      status: document.getElementById('status').textContent,
      webhooksMessage: document.getElementById('webhooks-message').textContent,
    };
  });
}

async function useKey(page, key) {
  await page.fill('#key-input', key);
  await page.press('#key-input', 'Enter');   // the form submits from the keyboard
}

try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') out.errors.push({ step, text: m.text() }); });
  page.on('pageerror', (e) => out.errors.push({ step, text: String(e) }));
  page.on('request', (r) => out.requests.push(r.url()));
  // layout shifts over the page's life (Chromium's Layout Instability API)
  await page.addInitScript(() => {
    window.__shifts = [];
    new PerformanceObserver((l) => { for (const e of l.getEntries()) if (!e.hadRecentInput)
      window.__shifts.push({ t: e.startTime, v: e.value }); })
      .observe({ type: 'layout-shift', buffered: true });
  });
  const resp = await page.goto(cfg.admin + '/', { waitUntil: 'load' });
  out.steps.headers = resp.headers();
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('updated'),
    null, { timeout: T });
  out.steps.noKey = await panels(page);
  // the test makes vendor calls now: the charts have a sample before them
  fs.writeFileSync(cfg.mark + '.loaded', '');
  for (let t = Date.now(); !fs.existsSync(cfg.mark + '.go'); await page.waitForTimeout(100))
    if (Date.now() - t > T) throw new Error('the test did not make its vendor calls');

  step = 'wrongKey';
  await useKey(page, cfg.wrongKey);
  await page.waitForFunction(() => document.getElementById('auth-message').textContent.includes('refused'),
    null, { timeout: T });
  out.steps.wrongKey = await panels(page);

  step = 'readKey';
  await useKey(page, cfg.readKey);
  await page.waitForFunction(() => document.getElementById('auth-message').textContent.includes('read-only'),
    null, { timeout: T });
  out.steps.readKey = await panels(page);

  step = 'viewKey';
  await useKey(page, cfg.viewKey);
  await page.waitForFunction(() => document.getElementById('auth-message').textContent.includes('admin-read') &&
    document.querySelectorAll('button[data-webhook]').length > 0, null, { timeout: T });
  out.steps.viewKey = await panels(page);

  step = 'adminKey';
  await useKey(page, cfg.adminKey);
  await page.waitForFunction((n) => document.querySelectorAll('button[data-webhook]').length > 0 &&
    document.querySelectorAll('#sweeps .sweep').length === n &&
    document.getElementById('auth-message').textContent === '', cfg.sweeps, { timeout: T });
  // the vendor latency chart has the calls made after the first sample
  await page.waitForFunction(() =>
    document.querySelectorAll('#chart-vendor-latency polyline.series').length >= 2, null,
  { timeout: T });
  // two refreshes more, then the figures settle; the layout must not move
  const t0 = await page.evaluate(() => performance.now());
  await page.waitForTimeout(4500);
  out.steps.shiftScore = await page.evaluate((t) => window.__shifts.filter((s) => s.t > t)
    .reduce((a, s) => a + s.v, 0), t0);
  out.steps.admin = await panels(page);
  out.steps.keyStored = await page.evaluate(() => sessionStorage.getItem('tidegate.adminKey'));
  out.steps.cookies = await context.cookies();

  for (const id of ['vendor', 'jobs', 'webhooks', 'simulations', 'fleet'])
    await page.locator('#' + id).screenshot({ path: path.join(cfg.shots, id + '.png') });
  await page.screenshot({ path: path.join(cfg.shots, 'console-1280.png'), fullPage: true });

  // keyboard: Tab from the top reaches the redeliver button
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  let reached = false;
  for (let i = 0; i < 80 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement &&
      document.activeElement.matches('button[data-webhook]'));
  }
  out.steps.tabReachesRedeliver = reached;

  // redeliver by clicking
  const first = out.steps.admin.buttons[0].id;
  await page.click(`button[data-webhook="${first}"]`);
  await page.waitForFunction(() => document.getElementById('webhooks-message').textContent.includes('queued'),
    null, { timeout: T });
  out.steps.redelivered = { id: first, message: await page.textContent('#webhooks-message') };

  // narrow window: nothing wider than the window
  await page.setViewportSize({ width: 400, height: 900 });
  await page.waitForTimeout(300);
  out.steps.narrowOverflow = await page.evaluate(() =>
    document.documentElement.scrollWidth - window.innerWidth);
  await page.screenshot({ path: path.join(cfg.shots, 'console-400.png'), fullPage: true });

  // the scheme follows the system
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.emulateMedia({ colorScheme: 'light' });
  const light = await bg();
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await bg();
  out.steps.schemes = { light, dark };
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: path.join(cfg.shots, 'console-dark.png'), fullPage: true });

  // a gateway that does not answer: the refresh gives up at its deadline
  // and says so; the page goes on once it answers again
  step = 'frozen';
  process.kill(cfg.pid, 'SIGSTOP');
  const t1 = Date.now();
  try {
    await page.waitForFunction(() => document.getElementById('status').textContent
      .includes('did not answer'), null, { timeout: 25000 });
  } finally {
    process.kill(cfg.pid, 'SIGCONT');
  }
  out.steps.frozen = { status: await page.textContent('#status'), ms: Date.now() - t1 };
  await page.waitForFunction(() => document.getElementById('status').textContent
    .startsWith('updated'), null, { timeout: 20000 });
  out.steps.thawed = true;
  await context.close();
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
