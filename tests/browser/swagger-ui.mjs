// End-to-end check of Swagger UI in a real headless Chromium (Debian's package).
// Usage: node swagger-ui.mjs BASE_URL TOKEN [SCREENSHOT]
// Opens /swagger-ui/, enters the token in "Authorize", runs "Try it out" on the
// market list and asserts that the page shows a 200 and a market symbol.
import { chromium } from 'playwright-core';

const [base, token, screenshot = 'target/swagger-ui.png'] = process.argv.slice(2);
if (!base || !token) {
  console.error('usage: node swagger-ui.mjs BASE_URL TOKEN [SCREENSHOT]');
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // This machine has no internet: keep Chromium from phoning home.
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'],
});
let failed = false;
const page = await browser.newPage({ viewport: { width: 1280, height: 1800 } });
try {
  page.setDefaultTimeout(20_000);
  await page.goto(`${base}/swagger-ui/`);
  await page.waitForSelector('.swagger-ui .info .title');
  const title = await page.textContent('.swagger-ui .info .title');
  if (!title.includes('Market and wallet data API')) throw new Error(`unexpected title: ${title}`);

  // Authorize with the API key.
  await page.click('.swagger-ui .auth-wrapper button.authorize');
  await page.fill('.swagger-ui .modal-ux input[type="text"]', token);
  await page.click('.swagger-ui .modal-ux .auth-btn-wrapper button.authorize');
  await page.waitForSelector('.swagger-ui .modal-ux .auth-btn-wrapper button.btn-done');
  await page.click('.swagger-ui .modal-ux .auth-btn-wrapper button.btn-done');

  // Try out GET /v1/networks/{network}/markets.
  const op = page.locator('#operations-markets-listMarkets');
  await op.locator('.opblock-summary').click();
  await op.locator('button.try-out__btn').click();
  const network = op.locator('tr[data-param-name="network"] select');
  if (await network.count()) await network.selectOption('perpnet');
  else await op.locator('tr[data-param-name="network"] input').fill('perpnet');
  await op.locator('button.execute').click();
  const status = op.locator('.live-responses-table .response .response-col_status').first();
  await status.waitFor();
  const code = (await status.textContent()).trim();
  if (code !== '200') throw new Error(`Try it out returned ${code}, expected 200`);
  const body = await op.locator('.live-responses-table .response-col_description pre.microlight').first().textContent();
  if (!body.includes('"symbol": "BTC"')) throw new Error(`response body shows no market symbol: ${body.slice(0, 300)}`);
  console.log('swagger-ui: authorized, Try it out on listMarkets returned 200 with BTC');
} catch (e) {
  failed = true;
  console.error(`swagger-ui e2e failed: ${e.message}`);
} finally {
  await page.screenshot({ path: screenshot, fullPage: false });
  console.log(`screenshot: ${screenshot}`);
  await browser.close();
}
process.exit(failed ? 1 : 0);
