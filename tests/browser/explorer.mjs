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
// the events page shows the published events live. It also reads the page
// as a trader would: chart text at 11 px or more on a 390 px phone and on
// a desktop, no axis label overlapping another or cut at an edge, the 1h
// and 4h time ticks on UTC midnights, compact figures rounded before their
// unit is picked (999,999.999 is $1.00M), funding as a percentage, the
// heatmap's legend on its square-root scale, backtick spans of a problem as
// <code>, and the last whale row visible above the pager.
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
const DAY = 86_400_000;
// The API's decimal fraction as the page should show it: ×100 by moving the
// point, with the page's minus sign (U+2212): "-0.0000096" → "−0.00096%".
function asPercent(str) {
  if (str === null || str === undefined) return '–';
  const neg = str.startsWith('-');
  const [int, frac = ''] = str.replace(/^[-+]/, '').split('.');
  const figures = (int + frac).replace(/^0+/, '') || '0';
  const decimals = frac.length - 2;
  let out = figures + '0'.repeat(Math.max(0, -decimals));
  if (decimals > 0) {
    const padded = figures.padStart(decimals + 1, '0');
    out = `${padded.slice(0, -decimals)}.${padded.slice(-decimals)}`;
  }
  return `${neg ? '−' : ''}${out}%`;
}
// "$2.52M" → 2520000.
const fromCompact = (text) => {
  const [, n, unit] = text.replace(/[$,]/g, '').replace('−', '-').match(/^(-?[\d.]+)([KMBT]?)$/) || [];
  return Number(n) * { '': 1, K: 1e3, M: 1e6, B: 1e9, T: 1e12 }[unit || ''];
};

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
const cardValue = (label) => page.locator('.card').filter({ has: page.getByText(label, { exact: true }) }).locator('.value').textContent();

// The text of the charts on the page as drawn: how many, the smallest
// rendered size (CSS px: font size times the SVG's scale), axis labels that
// overlap one another, and labels reaching past the chart's edge.
const chartText = () => page.evaluate(() => {
  const out = { count: 0, minPx: Infinity, overlaps: [], cut: [] };
  for (const svg of document.querySelectorAll('main svg.chart, main svg[data-legend]')) {
    const name = svg.dataset.chart || svg.dataset.legend;
    const vb = svg.viewBox.baseVal;
    for (const t of svg.querySelectorAll('text')) {
      out.count += 1;
      out.minPx = Math.min(out.minPx, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
      const b = t.getBBox();
      if (b.x < vb.x - 0.5 || b.x + b.width > vb.x + vb.width + 0.5) out.cut.push(`${name}: ${t.textContent}`);
    }
    for (const g of [...svg.querySelectorAll('g.axis'), ...(svg.dataset.legend ? [svg] : [])]) {
      const boxes = [...g.querySelectorAll('text')].map((t) => [t.textContent, t.getBBox()]);
      boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
        if (p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height) out.overlaps.push(`${name}: ${a} / ${b}`);
      }));
    }
  }
  return out;
});
async function readable(where) {
  const t = await chartText();
  check(t.count > 0 && t.minPx >= 11, `${where}: chart text is at least 11 px (smallest ${t.minPx.toFixed(1)} px of ${t.count})`);
  check(t.overlaps.length === 0, `${where}: no axis label overlaps another${t.overlaps.length ? `: ${t.overlaps.slice(0, 3).join('; ')}` : ''}`);
  check(t.cut.length === 0, `${where}: no chart label is cut at an edge${t.cut.length ? `: ${t.cut.slice(0, 3).join('; ')}` : ''}`);
}
// The heatmap's legend, read against the cells: it says its scale is the
// square root; a tick at fraction f along the bar reads max × f² (max: the
// largest cell's USD); and every cell has the bar's colour at √(USD / max).
async function heatmapLegend() {
  if (await page.locator('svg[data-legend=heatmap]').count() !== 1) {
    check(false, 'the heatmap has a legend scale (svg[data-legend=heatmap])');
    return;
  }
  const { caption, ticks, stops, cells } = await page.evaluate(() => {
    const svg = document.querySelector('svg[data-legend=heatmap]');
    const bar = svg.querySelector('rect[fill^="url("]').getBBox();
    const rgb = (text) => text.match(/\d+/g).slice(0, 3).map(Number);
    return {
      caption: svg.parentElement.textContent,
      ticks: [...svg.querySelectorAll('text')].map((t) => [t.textContent, (Number(t.getAttribute('x')) - bar.x) / bar.width]),
      stops: [...svg.querySelectorAll('stop')].map((st) => {
        const offset = st.getAttribute('offset');
        return [offset.endsWith('%') ? parseFloat(offset) / 100 : Number(offset), rgb(getComputedStyle(st).stopColor)];
      }),
      cells: [...document.querySelectorAll('[data-chart=heatmap] rect.cell')].map((r) => [
        Number(r.querySelector('title').textContent.split(': ').pop().replace(/[$,]/g, '')), rgb(r.getAttribute('fill'))]),
    };
  });
  const max = Math.max(...cells.map(([usd]) => usd));
  const wrongTicks = ticks.filter(([label, f]) => Math.abs(fromCompact(label) - max * f * f) > 0.01 * max * f * f + 1);
  check(/square.root/i.test(caption) && ticks.length >= 3 && ticks.some(([, f]) => f > 0.1 && f < 0.9) && wrongTicks.length === 0,
    `the heatmap legend is on the square-root scale: ${ticks.map(([l, f]) => `${l} at ${(f * 100).toFixed(0)} %`).join(', ')} (max cell ${Math.round(max)})${wrongTicks.length ? `; off: ${wrongTicks.map(([l]) => l).join(', ')}` : ''}`);
  const colourAt = (t) => {
    const i = Math.max(0, stops.findIndex(([o], k) => k > 0 && t <= o) - 1);
    const [[o0, c0], [o1, c1]] = [stops[i], stops[i + 1]];
    return c0.map((c, k) => c + ((c1[k] - c) * (t - o0)) / (o1 - o0));
  };
  const offColour = cells.filter(([usd, fill]) => colourAt(Math.sqrt(usd / max)).some((c, k) => Math.abs(c - fill[k]) > 2));
  check(stops.length >= 2 && offColour.length === 0,
    `each of the ${cells.length} heatmap cells has the legend's colour at its USD${offColour.length ? `; ${offColour.length} do not, e.g. ${offColour[0][0]}: rgb(${offColour[0][1]})` : ''}`);
}
// The price chart's time ticks: each where the chart draws that instant (by
// the candles' positions), on a UTC midnight and labelled with its date; a
// whole number of days apart, the same number each time.
async function midnightTicks(where) {
  const { candles, ticks } = await page.locator('[data-chart=candles]').evaluate((svg) => ({
    candles: [...svg.querySelectorAll('g.candle')].map((g) => [g.querySelector('title').textContent.slice(0, 16), Number(g.querySelector('line').getAttribute('x1'))]),
    ticks: [...svg.querySelectorAll('g[data-axis=time] text')].map((t) => [t.textContent, Number(t.getAttribute('x'))]),
  }));
  const [[first, x0], [last, x1]] = [candles[0], candles[candles.length - 1]];
  const [t0, t1] = [Date.parse(`${first.replace(' ', 'T')}Z`), Date.parse(`${last.replace(' ', 'T')}Z`)];
  const times = ticks.map(([, x]) => t0 + ((x - x0) / (x1 - x0)) * (t1 - t0));
  const off = ticks.filter(([label], i) => Math.abs(times[i] - Math.round(times[i] / DAY) * DAY) > 60_000
    || label !== day(Math.round(times[i] / DAY) * DAY).slice(5));
  const steps = new Set(times.slice(1).map((t, i) => Math.round((t - times[i]) / DAY * 1000) / 1000));
  const [step] = steps;
  check(ticks.length >= 3 && off.length === 0 && steps.size === 1 && Number.isInteger(step) && step <= 14,
    `${where}: time ticks on UTC midnights, a whole number of days apart (${ticks.length} ticks, ${[...steps].join('/')} day(s) apart: ${ticks.map(([l]) => l).join(' ')})${off.length ? `; off midnight: ${off.map(([l]) => l).join(' ')}` : ''}`);
}

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
    if (name === 'a mistyped key') {
      // The server's reason names `mds_`: a code span, not backticks.
      const code = await page.locator('.key-form [role=alert] code').allTextContents();
      check(code.includes('mds_') && !alert.includes('`'), `the reason's backtick spans are <code> (${code.join(', ')})`);
    }
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
  // Funding as a percentage, with the minus sign of the other negatives.
  const fundingColumn = await page.locator('#markets-table thead th').evaluateAll((ths) => ths.findIndex((th) => th.textContent === 'Funding'));
  const fundings = await rows('#markets-table').evaluateAll((trs, i) => trs.map((tr) => [tr.dataset.symbol, tr.cells[i].textContent]), fundingColumn);
  const wrongFunding = fundings.filter(([symbol, text]) => text !== asPercent(markets.items.find((m) => m.symbol === symbol).funding));
  check(fundings.length === markets.items.length && wrongFunding.length === 0,
    `funding is a percentage in every row, e.g. ${fundings.slice(0, 2).map(([sy, t]) => `${sy} ${t}`).join(', ')}${wrongFunding.length ? `; wrong: ${wrongFunding.slice(0, 3).map(([sy, t]) => `${sy} ${t}`).join(', ')}` : ''}`);
  const negativeChange = await rows('#markets-table').evaluateAll((trs) => trs.map((tr) => tr.cells[2].textContent).find((t) => /^[−-]/.test(t)));
  const negativeFunding = fundings.find(([, t]) => /^[−-]/.test(t));
  check(negativeChange?.startsWith('−') && negativeFunding?.[1].startsWith('−'),
    `a negative funding has the minus sign of a negative 24h change, U+2212 (${negativeFunding?.join(' ')}; ${negativeChange})`);
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
  // Every row is in the page, the last one too, above "Next page": no inner
  // scroll box hides it. Scrolling the window (not the box) must show it.
  const lastWhale = await page.locator('section[aria-labelledby=whales-h]').evaluate((section) => {
    const wrap = section.querySelector('.table-wrap');
    const row = section.querySelector('tbody tr:last-child');
    window.scrollBy(0, row.getBoundingClientRect().top - window.innerHeight / 2);
    const r = row.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + 10, r.top + r.height / 2);
    const next = section.querySelector('button[data-next]').getBoundingClientRect();
    window.scrollTo(0, 0);
    return { hidden: wrap.scrollHeight - wrap.clientHeight, shown: row.contains(hit), above: r.bottom <= next.top };
  });
  check(lastWhale.hidden <= 1 && lastWhale.shown && lastWhale.above,
    `the last whale row is visible above "Next page", with no inner scroll (${lastWhale.hidden} px scrolled away, ${lastWhale.shown ? 'shown' : 'covered'})`);
  check(await cardValue('Funding (hourly)') === asPercent(market.funding), `the funding card is a percentage (${await cardValue('Funding (hourly)')} for ${market.funding})`);
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
  await readable('market page, 1400 px');
  // The 1h and 4h price charts: their date ticks on UTC midnights.
  await midnightTicks('1h candles');
  await settled(() => page.selectOption('section[aria-labelledby=price-h] select', '4h'));
  await midnightTicks('4h candles');

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
  await heatmapLegend();
  await readable('heatmap, 1400 px');
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
  await readable('wallet page');
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

  console.log('figures at unit boundaries');
  // The market and the wallet answer figures just under a unit boundary
  // (changed on their way to the page): rounded, they reach the next unit.
  const boundary = {
    openInterest: ['999999.999', '$1.00M'], volume24h: ['999.996', '$1.00K'],
    longLiquidationValue: ['999999999.5', '$1.00B'], shortLiquidationValue: ['999994', '$999.99K'], funding: ['-0.000125', '−0.0125%'],
  };
  const walletBoundary = { netPnl: ['-999999.995', '−$1.00M'], totalPositionValue: ['999.4', '$999'] };
  const patch = (changes) => async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    const target = body.wallet || body;
    for (const [field, [value]] of Object.entries(changes)) target[field] = value;
    await route.fulfill({ response: res, json: body });
  };
  const marketPath = (u) => u.pathname === `/v1/networks/perpnet/markets/${asset}`;
  // A wallet of the data as it is now (the events step may have re-seeded).
  const someWallet = (await api('/wallets', { limit: 1 })).items[0].address;
  const walletPath = (u) => u.pathname === `/v1/networks/perpnet/wallets/${someWallet}`;
  await page.route(marketPath, patch(boundary));
  await page.route(walletPath, patch(walletBoundary));
  await settled(() => page.goto(`${base}/explore#/markets/${asset}`));
  const marketCards = [['Open interest', 'openInterest'], ['Volume 24h', 'volume24h'], ['Long liquidation value', 'longLiquidationValue'],
    ['Short liquidation value', 'shortLiquidationValue'], ['Funding (hourly)', 'funding']];
  for (const [label, field] of marketCards) {
    const [value, want] = boundary[field];
    const shown = await cardValue(label);
    check(shown === want, `${label} ${value} reads ${want} (${shown})`);
  }
  await settled(() => page.goto(`${base}/explore#/wallets/${someWallet}`));
  for (const [label, field] of [['Net PnL', 'netPnl'], ['Position value', 'totalPositionValue']]) {
    const [value, want] = walletBoundary[field];
    const shown = await cardValue(label);
    check(shown === want, `${label} ${value} reads ${want} (${shown})`);
  }
  await page.unroute(marketPath);
  await page.unroute(walletPath);

  console.log('a phone, 390 px wide');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto('about:blank');
  await page.goto(`${base}/explore#/markets/${asset}`, { waitUntil: 'commit' });
  await ready();
  await readable('market page, 390 px');
  await midnightTicks('1h candles, 390 px');
  await page.screenshot({ path: `${out}/explorer-phone.png`, fullPage: true });
  await settled(() => page.click('#tab-heatmap'));
  await readable('heatmap, 390 px');
  await heatmapLegend();
  await axe('market page, 390 px');
  await page.setViewportSize({ width: 1400, height: 1000 });

  console.log('problems on the page');
  expected = /status of 404/;
  await settled(() => page.goto(`${base}/explore#/markets/NO-SUCH-ASSET`));
  const problem = await page.textContent('main .problem');
  check(problem.includes('404') && problem.includes('Unknown asset'), `an unknown market shows the API's problem: ${problem.trim().slice(0, 90)}`);
  check(await page.locator('main .problem').count() === 1, 'one problem, not one per section');
  // The detail's `NO-SUCH-ASSET` is a code span, not backticks.
  check(await page.locator('main .problem code').allTextContents().then((c) => c.join()) === 'NO-SUCH-ASSET' && !problem.includes('`'),
    'the problem\'s backtick span is a <code> element');
  // Server text is text: an asset named like markup stays text in <code>.
  await settled(() => page.goto(`${base}/explore#/markets/${encodeURIComponent('<b>x</b>')}`));
  const markupCode = await page.locator('main .problem code').allTextContents();
  check(markupCode[0] === '<b>x</b>' && await page.locator('main .problem b').count() === 0,
    `markup in a problem's detail is shown as text, not parsed (${markupCode.join(', ')})`);
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
