// End-to-end check of the explorer (/explore) in Debian's headless Chromium,
// against a running server with demo data.
//
//   node explorer.mjs BASE_URL TOKEN REVOKED_TOKEN [OUT_DIR]
//
// It walks every page as a user would (key form, markets, one market, its
// 90-day heatmap, a wallet, position events, wallets) and checks that each
// page renders with data, that every chart draws as many marks as the API
// answer it was drawn from holds, that the liquidation map's totals equal
// the API's, that no request leaves the origin, that the console stays
// clean, that axe-core finds no WCAG 2.1 A/AA violation, and that the
// market page is ready within 1 s and weighs at most 500 KB compressed. With
// RESEED_CMD (a command that publishes a new data version), it checks that
// the events page shows the published events live.
// Screenshots go to OUT_DIR (default target/).
import { execSync } from 'node:child_process';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const [base, token, revoked, out = 'target'] = process.argv.slice(2);
if (!base || !token || !revoked) {
  console.error('usage: node explorer.mjs BASE_URL TOKEN REVOKED_TOKEN [OUT_DIR]');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const origin = new URL(base).origin;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const READY_MS = 1000;
const WEIGHT_BYTES = 500 * 1024;

async function api(path, params = {}) {
  const url = new URL(`${base}/v1/networks/perpnet${path}`);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  const res = await fetch(url, { headers: { 'X-API-Key': token } });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

const failures = [];
function check(ok, what) {
  if (ok) console.log(`  ok: ${what}`);
  else { console.error(`  FAILED: ${what}`); failures.push(what); }
}
const digits = (text) => text.replace(/[$,\s]/g, '').replace('−', '-');
const day = (ms) => new Date(ms).toISOString().slice(0, 10);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
const offOrigin = [];
context.on('request', (r) => { if (new URL(r.url()).origin !== origin) offOrigin.push(r.url()); });
const page = await context.newPage();
page.setDefaultTimeout(30_000);

// A 401 or 404 the page asked for is logged by Chromium as a console error;
// only the steps that provoke one accept it.
const consoleErrors = [];
let expected = null;
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  if (process.env.DEBUG) console.log('console:', m.text(), JSON.stringify(m.location()));
  if (expected && expected.test(m.text())) return;
  consoleErrors.push(m.text());
});
page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));

// API answers by path, as the page received them. Reading a body is
// asynchronous: `ready` waits for the reads in progress, so an answer the
// page has drawn is in `answers` by then.
const answers = [];
const reading = new Set();
page.on('response', (r) => {
  const u = new URL(r.url());
  // The event stream's body never ends.
  if (!u.pathname.startsWith('/v1/') || u.pathname.endsWith('/stream') || !r.ok()) return;
  const read = r.json()
    .then((body) => { answers.push({ path: u.pathname, query: u.searchParams, body }); })
    .catch(() => { /* navigated away */ })
    .finally(() => reading.delete(read));
  reading.add(read);
});
const lastAnswer = (suffix, pred = () => true) => [...answers].reverse().find((a) => a.path.endsWith(suffix) && pred(a));

const ready = async () => {
  await page.waitForFunction(() => document.body.dataset.state === 'ready');
  await Promise.all([...reading]);
};
// Runs `action` (a click, a key, a hash navigation) and waits until the page
// it leads to is ready. A hash change is handled in a later task, so the
// state is first marked stale: the old page's `ready` must not count.
async function settled(action) {
  await page.evaluate(() => { document.body.dataset.state = 'stale'; });
  await action();
  await ready();
}
const state = (s) => page.waitForFunction((want) => document.body.dataset.state === want, s);
async function axe(name) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
  }));
  const found = result.violations.map((v) => `${v.id} (${v.nodes.length}): ${v.nodes[0].target.join(' ')}`);
  check(found.length === 0, `${name}: no WCAG A/AA violation${found.length ? `: ${found.join('; ')}` : ''}`);
}
// Runs `action`, printing how long it took and the bytes its requests
// transferred (compressed bodies and headers).
async function measured(name, action) {
  const sizes = [];
  const onFinished = (r) => sizes.push(r.sizes().then((sz) => sz.responseBodySize + sz.responseHeadersSize));
  page.on('requestfinished', onFinished);
  const start = Date.now();
  await action();
  const ms = Date.now() - start;
  page.off('requestfinished', onFinished);
  const bytes = (await Promise.all(sizes)).reduce((a, b) => a + b, 0);
  console.log(`  ${name}: ready after ${ms} ms, ${sizes.length} requests, ${(bytes / 1024).toFixed(1)} KB transferred`);
  return { ms, bytes };
}
const rows = (scope) => page.locator(`${scope} tbody tr:not([hidden])`);

try {
  console.log('key form');
  await page.goto(`${base}/explore`);
  await state('key');
  check(await page.locator('#api-key').isVisible(), 'without a key the page asks for one');
  await axe('key form');

  expected = /status of 401/;
  for (const [name, key] of [['a mistyped key', 'mds_not-a-real-key'], ['a revoked key', revoked]]) {
    await page.fill('#api-key', key);
    await page.evaluate(() => { document.body.dataset.state = 'stale'; });
    await page.press('#api-key', 'Enter');
    await state('key');
    await page.locator('.key-form [role=alert]').waitFor();
    const alert = await page.textContent('.key-form [role=alert]');
    check(alert.includes('did not accept'), `${name} is refused on the page: ${alert.trim().slice(0, 120)}`);
  }
  expected = null;

  console.log('markets');
  await page.fill('#api-key', token);
  await settled(() => page.press('#api-key', 'Enter'));
  const markets = await api('/markets');
  check(await rows('#markets-table').count() === markets.items.length, `markets table has all ${markets.items.length} markets`);
  check(await rows('#markets-table').first().getAttribute('data-symbol') === markets.items[0].symbol, 'default order is the API\'s (volume24h)');
  check(await page.evaluate(() => sessionStorage.getItem('mds.apiKey') !== null), 'the key is kept in sessionStorage');
  // Sorting by keyboard: focus the column's button and press Enter.
  await page.focus('th button[data-sort="openInterest"]');
  await settled(() => page.keyboard.press('Enter'));
  const byOi = await api('/markets', { sort: 'openInterest' });
  const shown = await rows('#markets-table').evaluateAll((trs) => trs.slice(0, 5).map((tr) => tr.dataset.symbol));
  check(JSON.stringify(shown) === JSON.stringify(byOi.items.slice(0, 5).map((m) => m.symbol)), `sorted by open interest (keyboard): ${shown.join(', ')}`);
  check(await page.getAttribute('th:has(button[data-sort="openInterest"])', 'aria-sort') === 'descending', 'the sorted column says so (aria-sort)');
  await settled(() => page.keyboard.press('Enter'));
  const byOiAsc = await api('/markets', { sort: 'openInterest', order: 'asc' });
  check(await rows('#markets-table').first().getAttribute('data-symbol') === byOiAsc.items[0].symbol, 'Enter again sorts ascending');
  await page.fill('#market-search', 'xyz:');
  const xyz = markets.items.filter((m) => m.symbol.toLowerCase().includes('xyz:')).length;
  check(await rows('#markets-table').count() === xyz && xyz > 0, `search "xyz:" shows the ${xyz} matching markets`);
  await page.fill('#market-search', 'no-such-market');
  check(await page.locator('.empty').isVisible(), 'a search without a match says so');
  await page.fill('#market-search', '');
  await axe('markets');
  await page.screenshot({ path: `${out}/explorer-markets.png` });

  console.log('market page');
  // Measured as a user gets it: a fresh navigation to the page.
  const asset = 'BTC';
  answers.length = 0;
  await page.goto('about:blank');
  // A new document (not a hash change): it starts in the `loading` state.
  const { ms: readyMs, bytes } = await measured('market page', async () => {
    await page.goto(`${base}/explore#/markets/${asset}`, { waitUntil: 'commit' });
    await ready();
  });
  check(readyMs <= READY_MS, `market page ready within ${READY_MS} ms (${readyMs} ms)`);
  check(bytes <= WEIGHT_BYTES, `market page weighs at most 500 KB compressed (${(bytes / 1024).toFixed(1)} KB)`);

  const candles = lastAnswer('/candles').body.candles;
  check(candles.length > 0 && await page.locator('[data-chart=candles] g.candle').count() === candles.length,
    `price chart draws one candle per candle answered (${candles.length})`);
  const levelsAnswer = lastAnswer('/liquidity-levels').body;
  const today = levelsAnswer.items[levelsAnswer.items.length - 1];
  // The chart shows the price range holding 99 % of the USD (its data-from
  // and data-to): one bar per level in it.
  const map = page.locator('[data-chart=liquidation-map]');
  const [from, to] = [Number(await map.getAttribute('data-from')), Number(await map.getAttribute('data-to'))];
  const inRange = today.levels.filter((l) => Number(l.bucketPrice) >= from && Number(l.bucketPrice) <= to).length;
  check(inRange >= today.levels.length * 0.5 && await map.locator('rect.bar').count() === inRange,
    `liquidation map draws one bar per level in its range (${inRange} of ${today.levels.length})`);
  check(await page.locator('[data-chart=liquidation-map] line.mark-price').count() === 1, 'the mark price is marked');
  // The totals on the page against the API's, asked independently.
  const own = (await api('/liquidity-levels', { asset, fromDate: today.date, toDate: today.date })).items[0];
  const market = await api(`/markets/${asset}`);
  for (const sd of ['long', 'short']) {
    const usd = digits(await page.textContent(`[data-total=${sd}] [data-usd]`));
    const count = digits(await page.textContent(`[data-total=${sd}] [data-count]`));
    check(usd === own.totals[sd].totalAmountUsd && Number(count) === own.totals[sd].positionCount,
      `${sd} totals on the page (${usd} in ${count}) equal the API's`);
    check(usd === market[`${sd}LiquidationValue`], `${sd} total equals the market's ${sd}LiquidationValue`);
  }
  const whales = lastAnswer('/whale-positions').body.items;
  check(whales.length > 0 && await rows('section[aria-labelledby=whales-h]').count() === whales.length, `whale table shows the ${whales.length} positions answered`);
  const history = lastAnswer('/history').body.items;
  const points = await page.locator('section[aria-labelledby=hist-h] path.series').evaluateAll((ps) => ps.map((p) => Number(p.dataset.points)));
  check(points.length === 4 && points.every((n) => n === history.length && n > 0), `history charts draw ${history.length} points per series (${points})`);
  const cohorts = lastAnswer('/cohorts').body.items;
  check(await page.locator('[data-chart=cohorts] rect.cohort').count() === cohorts.length, `cohort chart draws ${cohorts.length} segments (${await page.locator('[data-chart=cohorts] rect.cohort').count()})`);
  check(await rows('section[aria-labelledby=coh-h]').count() === cohorts.length, 'cohort table lists every class and side');
  await page.waitForFunction(() => document.querySelector('#live-h + [role=status]')?.textContent.startsWith('Live:'));
  check(true, 'the market page follows the live stream of its asset');
  await axe('market page');
  await page.screenshot({ path: `${out}/explorer-market.png`, fullPage: true });

  // Whale filters and paging.
  await settled(() => page.selectOption('section[aria-labelledby=whales-h] select >> nth=0', 'short'));
  const sides = await rows('section[aria-labelledby=whales-h]').evaluateAll((trs) => trs.map((tr) => tr.cells[1].textContent));
  check(sides.length > 0 && sides.every((t) => t === 'short'), 'direction filter: only shorts');
  const firstPage = await rows('section[aria-labelledby=whales-h]').first().textContent();
  await settled(() => page.click('section[aria-labelledby=whales-h] button[data-next]'));
  check(await rows('section[aria-labelledby=whales-h]').first().textContent() !== firstPage
    && (await page.textContent('section[aria-labelledby=whales-h] .toolbar .muted')).includes('page 2'), 'next page of whales');

  // The 90-day heatmap, reached by keyboard (arrow keys on the tabs).
  await page.focus('#tab-today');
  await measured('heatmap tab', () => settled(() => page.keyboard.press('ArrowRight')));
  check(await page.getAttribute('#tab-heatmap', 'aria-selected') === 'true', 'the 90-day tab is selected by keyboard');
  const days = answers.filter((a) => a.path.endsWith('/liquidity-levels') && a.query.get('limit') === '90').flatMap((a) => a.body.items);
  const withLevels = days.filter((d) => d.levels.length).length;
  const columns = await page.locator('[data-chart=heatmap] rect.cell').evaluateAll((rs) => new Set(rs.map((r) => r.getAttribute('x'))).size);
  check(days.length >= 30 && columns === withLevels, `heatmap has a column for each of the ${withLevels} days with levels (${columns})`);
  check(await page.locator('section[aria-labelledby=liq-h] details.alt tbody tr').count() === 10, 'heatmap has its top cells as a table');
  await axe('market page, heatmap');
  await page.locator('section[aria-labelledby=liq-h]').screenshot({ path: `${out}/explorer-heatmap.png` });

  console.log('wallet page');
  await settled(() => page.click('section[aria-labelledby=whales-h] tbody tr:first-child td:first-child a'));
  const address = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const wallet = await api(`/wallets/${address}`);
  check(await rows('section[aria-labelledby=pos-h]').count() === wallet.wallet.positions, `wallet positions table has wallet.positions = ${wallet.wallet.positions} rows`);
  const walletHistory = lastAnswer('/history').body.items;
  const wpoints = await page.locator('section[aria-labelledby=wh-h] path.series').evaluateAll((ps) => ps.map((p) => Number(p.dataset.points)));
  check(wpoints.length === 3 && wpoints.every((n) => n === walletHistory.length && n > 0), `wallet history draws ${walletHistory.length} points per series (${wpoints})`);
  const events = lastAnswer('/position-events').body.items;
  check(await rows('section[aria-labelledby=ev-h]').count() === events.length, `wallet events table shows the ${events.length} events answered`);
  await axe('wallet page');
  await page.screenshot({ path: `${out}/explorer-wallet.png`, fullPage: true });

  console.log('position events');
  await settled(() => page.click('nav a[data-nav=events]'));
  check(await rows('main').count() > 0, 'position events are listed');
  await page.waitForFunction(() => document.querySelector('#live-h + [role=status]')?.textContent.startsWith('Live:'));
  check(true, 'the events page follows the live stream');
  if (process.env.RESEED_CMD) {
    // A writer publishes while the page is open: its events appear in the
    // Live panel without a reload.
    const url = page.url();
    execSync(process.env.RESEED_CMD, { stdio: 'ignore' });
    await page.waitForFunction(() => document.querySelectorAll('#live-events tbody tr').length > 0, null, { timeout: 30_000 });
    const live = await page.locator('#live-events tbody tr').count();
    check(live > 0 && live <= 50 && page.url() === url, `${live} published events appeared live, without a reload`);
  }
  await settled(() => page.selectOption('main .toolbar select >> nth=0', 'closed_near_liquidation'));
  const kinds = await rows('main').evaluateAll((trs) => trs.map((tr) => tr.cells[3].textContent));
  check(kinds.length > 0 && kinds.every((k) => k === 'closed near liquidation'), `kind filter: ${kinds.length} closed near liquidation`);
  await axe('position events');

  console.log('wallets');
  await settled(() => page.click('nav a[data-nav=wallets]'));
  const walletList = await api('/wallets', { limit: 50 });
  check(await rows('main').count() === walletList.items.length, `wallet list shows ${walletList.items.length} wallets (${await rows('main').count()})`);
  await settled(() => page.selectOption('main .toolbar select >> nth=0', 'whale'));
  const classes = await rows('main').evaluateAll((trs) => trs.map((tr) => tr.cells[1].textContent));
  check(classes.length > 0 && classes.every((c) => c === 'whale'), 'size filter: only whales');
  await axe('wallets');

  console.log('problems on the page');
  expected = /status of 404/;
  await settled(() => page.goto(`${base}/explore#/markets/NO-SUCH-ASSET`));
  const problem = await page.textContent('main .problem');
  check(problem.includes('404') && problem.includes('Unknown asset'), `an unknown market shows the API's problem: ${problem.trim().slice(0, 90)}`);
  check(await page.locator('main .problem').count() === 1, 'one problem, not one per section');
  await settled(() => page.goto(`${base}/explore#/wallets/0x000000000000000000000000000000000000dead`));
  check((await page.textContent('main .problem')).includes('not served'), 'an unknown wallet shows the API\'s problem');
  expected = null;
  await page.click('#forget-key');
  await state('key');
  check(await page.evaluate(() => sessionStorage.getItem('mds.apiKey')) === null, '"Forget key" clears the key and asks again');

  check(offOrigin.length === 0, `no request left the origin${offOrigin.length ? `: ${offOrigin.slice(0, 3).join(', ')}` : ''}`);
  check(consoleErrors.length === 0, `no console error${consoleErrors.length ? `: ${consoleErrors.slice(0, 3).join(' | ')}` : ''}`);
} catch (e) {
  failures.push(e.message);
  console.error(`explorer e2e failed: ${e.stack}`);
  await page.screenshot({ path: `${out}/explorer-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
if (failures.length) {
  console.error(`explorer: ${failures.length} check(s) failed`);
  process.exit(1);
}
console.log(`explorer: every check passed; screenshots in ${out}/`);
