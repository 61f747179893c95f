-- wrk script: every request asks for a database-backed page that is not in
-- the page cache (liquidity-levels and candles with parameters that change
-- each time), with the key in $TOKEN. $TODAY is the current UTC date.
local token = os.getenv("TOKEN")
local today = os.getenv("TODAY")
local assets = { "BTC", "ETH", "SOL", "XRP", "DOGE", "AVAX", "LINK", "ARB" }
local n = 0
local now_ms = os.time() * 1000

function setup(thread)
  thread:set("offset", math.random(0, 1000000))
end

function request()
  n = n + 1
  local k = n + (offset or 0)
  local asset = assets[(k % #assets) + 1]
  local path
  if k % 2 == 0 then
    -- a window of 2 to 30 days ending today, 1 to 200 rows
    local y, m, d = today:match("(%d+)-(%d+)-(%d+)")
    local from = os.date("!%Y-%m-%d", os.time({ year = y, month = m, day = d, hour = 12 }) - 86400 * (1 + k % 29))
    path = string.format("/v1/networks/perpnet/liquidity-levels?fromDate=%s&toDate=%s&asset=%s&limit=%d",
      from, today, asset, 1 + math.floor(k / 29) % 200)
  else
    -- hourly candles ending at another hour of the last 90 days each time
    path = string.format("/v1/networks/perpnet/markets/%s/candles?interval=1h&limit=%d&to=%d",
      asset, 24 + k % 200, now_ms - (math.floor(k / 8) % 2160) * 3600000)
  end
  return wrk.format("GET", path, { ["X-API-Key"] = token })
end
