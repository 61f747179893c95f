// Calls every operation of the generated TypeScript client against a running
// server (the demo dataset), as a user of the client would:
//
//   node build/check.js BASE_URL API_KEY OPENAPI_JSON
//
// It fails (exit 1) when the client has other than one function per
// operation, when an operation is not called, or when an answer is wrong.
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

import { client } from './generated/client.gen.js';
import * as sdk from './generated/sdk.gen.js';
import type { Problem } from './generated/types.gen.js';

const [base, key, docPath] = process.argv.slice(2);
if (!base || !key || !docPath) {
  console.error('usage: node build/check.js BASE_URL API_KEY OPENAPI_JSON');
  process.exit(2);
}

// One function per operation: the document's operationIds, exactly.
const doc = JSON.parse(readFileSync(docPath, 'utf8')) as {
  paths: Record<string, Record<string, { operationId?: string }>>;
};
const operations = Object.values(doc.paths).flatMap((item) =>
  ['get', 'head', 'post', 'put', 'patch', 'delete'].flatMap((m) => item[m]?.operationId ?? []),
);
// An endpoint declared twice (as the alias prefix once was) is a duplicate
// operation: the alias prefix is a server, never a second path.
const endpoints = new Set(
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.keys(item).filter((m) => m !== 'servers').map((m) => `${m} ${path.replace(/^\/api\/developer(?=\/v1\/)/, '')}`),
  ),
);
assert.equal(operations.length, endpoints.size, 'one operation per endpoint (no endpoint declared twice)');
const functions = Object.entries(sdk)
  .filter(([, f]) => typeof f === 'function')
  .map(([name]) => name)
  .sort();
assert.deepEqual(functions, [...operations].sort(), 'one generated function per operation');

const called = new Set<string>();
const network = 'perpnet';
client.setConfig({ baseUrl: base, headers: { 'X-API-Key': key } });

/** The data of a call that must answer 200. */
function ok<T>(name: string, result: { data?: T; error?: unknown; response?: Response }): T {
  called.add(name);
  assert.equal(result.response?.status, 200, `${name}: ${JSON.stringify(result.error)}`);
  assert.ok(result.data !== undefined, `${name}: no data`);
  return result.data as T;
}

// Health checks (no key needed, root server only).
assert.equal(ok('healthz', await sdk.healthz()).status, 'ok');
assert.equal(ok('readyz', await sdk.readyz()).status, 'ready');

// Both servers of the document answer the same.
const networks = ok('listNetworks', await sdk.listNetworks());
const alias = await sdk.listNetworks({ baseUrl: `${base}/api/developer` });
assert.deepEqual(alias.data, networks, 'the alias prefix answers the same');

const markets = ok('listMarkets', await sdk.listMarkets({ path: { network }, query: { sort: 'openInterest', order: 'desc' } }));
assert.ok(markets.items.length > 0, 'the demo has markets');
const btc = ok('getMarket', await sdk.getMarket({ path: { network, asset: 'BTC' } }));
assert.equal(btc.symbol, 'BTC');
// Decimals are strings in plain notation.
assert.match(btc.openInterest, /^-?[0-9]+(\.[0-9]+)?$/);

// A problem answer: typed, with the problem media type.
const missing = await sdk.getMarket({ path: { network, asset: 'NOPE' } });
assert.equal(missing.response?.status, 404);
assert.equal(missing.response?.headers.get('content-type'), 'application/problem+json');
const problem = missing.error as Problem;
assert.equal(problem.status, 404);
assert.ok(problem.type.startsWith('urn:') && problem.title.length > 0 && problem.detail.includes('NOPE'), JSON.stringify(problem));

// One paged list to its end: every BTC position, as many as the market counts.
let positions = 0;
let cursor: string | undefined;
const seen = new Set<string>();
do {
  const page: sdk.Options<import('./generated/types.gen.js').ListMarketPositionsData>['query'] = { limit: 200, cursor };
  const data = ok('listMarketPositions', await sdk.listMarketPositions({ path: { network, asset: 'BTC' }, query: page }));
  for (const p of data.items) {
    assert.ok(!seen.has(p.address), `${p.address} on two pages`);
    seen.add(p.address);
  }
  positions += data.items.length;
  cursor = data.nextCursor ?? undefined;
} while (cursor);
assert.equal(positions, btc.longCount + btc.shortCount, 'every page of BTC positions, as many as the market counts');

const wallets = ok('listWallets', await sdk.listWallets({ path: { network }, query: { size: 'whale', limit: 5 } }));
const address = wallets.items[0]?.address;
assert.ok(address, 'the demo has whales');
ok('getWallet', await sdk.getWallet({ path: { network, address } }));
ok('getWalletHistory', await sdk.getWalletHistory({ path: { network, address }, query: { interval: '1h' } }));

const today = new Date().toISOString().slice(0, 10);
const levels = ok('listLiquidityLevels', await sdk.listLiquidityLevels({ path: { network }, query: { fromDate: today, toDate: today, asset: 'BTC' } }));
assert.ok(levels.items.length <= 1);
const candles = ok('listCandles', await sdk.listCandles({ path: { network, asset: 'BTC' }, query: { interval: '1h', limit: 24 } }));
assert.ok(candles.candles.length > 0, 'the demo has candles');
ok('getCoverage', await sdk.getCoverage({ path: { network } }));
ok('getMarketCohorts', await sdk.getMarketCohorts({ path: { network, asset: 'BTC' } }));
ok('getMarketHistory', await sdk.getMarketHistory({ path: { network, asset: 'BTC' }, query: { interval: '1h' } }));
const events = ok('listPositionEvents', await sdk.listPositionEvents({ path: { network }, query: { limit: 5 } }));
assert.ok(events.items.length > 0, 'the demo has position events');

// The event stream: replay the stored events from the start, take three.
const abort = new AbortController();
const ids: string[] = [];
const { stream } = await sdk.streamPositionEvents({
  path: { network },
  query: { since: '0' },
  signal: abort.signal,
  sseMaxRetryAttempts: 1,
  onSseEvent: (event) => {
    if (event.event === 'position-event' && event.id) ids.push(event.id);
  },
});
called.add('streamPositionEvents');
// The stream opens with the current `data-version`, then replays.
let received = 0;
let versions = 0;
for await (const event of stream) {
  assert.ok(typeof event === 'object' && event !== null, 'every event carries JSON');
  if ('version' in event) versions += 1;
  else if ('symbol' in event && ++received === 3) break;
}
abort.abort();
assert.equal(ids.length, 3, 'three position events, each with its id');
assert.ok(versions >= 1, 'a data-version event first');
assert.ok(ids.every((id, i) => /^[0-9]+$/.test(id) && (i === 0 || BigInt(id) > BigInt(ids[i - 1]!))), `ids in order: ${ids}`);

assert.deepEqual([...called].sort(), [...operations].sort(), 'every operation was called');
console.log(`typescript client: ${functions.length} functions for ${operations.length} operations, all called; ${positions} BTC positions paged to the end`);
