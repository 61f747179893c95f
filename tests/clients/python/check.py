"""Calls every operation of the generated Python client against a running
server (the demo dataset), as a user of the client would:

    python check.py CLIENT_DIR BASE_URL API_KEY OPENAPI_JSON

CLIENT_DIR holds the generated package `market_data_client`. Exits non-zero
when the client has other than one function per operation, when an
operation is not called, or when an answer is wrong.
"""

import datetime
import importlib
import json
import pkgutil
import re
import sys
from http import HTTPStatus

client_dir, base, key, doc_path = sys.argv[1:5]
sys.path.insert(0, client_dir)

import market_data_client.api as api  # noqa: E402
from market_data_client import AuthenticatedClient, Client  # noqa: E402
from market_data_client.api.candles import list_candles  # noqa: E402
from market_data_client.api.coverage import get_coverage  # noqa: E402
from market_data_client.api.health import healthz, readyz  # noqa: E402
from market_data_client.api.history import (  # noqa: E402
    get_market_cohorts,
    get_market_history,
    get_wallet_history,
    list_position_events,
    stream_position_events,
)
from market_data_client.api.liquidity import list_liquidity_levels  # noqa: E402
from market_data_client.api.markets import get_market, list_markets  # noqa: E402
from market_data_client.api.networks import list_networks  # noqa: E402
from market_data_client.api.positions import list_market_positions  # noqa: E402
from market_data_client.api.wallets import get_wallet, list_wallets  # noqa: E402
from market_data_client.models import (  # noqa: E402
    HistoryInterval,
    Interval,
    MarketSort,
    NetworkId,
    Problem,
    SizeClass,
)
from market_data_client.types import UNSET  # noqa: E402

# One module (one function set) per operation: the document's operationIds.
with open(doc_path) as f:
    doc = json.load(f)
operations = sorted(
    op["operationId"]
    for item in doc["paths"].values()
    for method, op in item.items()
    if method in ("get", "head", "post", "put", "patch", "delete")
)
endpoints = {
    f"{method} {re.sub(r'^/api/developer(?=/v1/)', '', path)}"
    for path, item in doc["paths"].items()
    for method in item
    if method != "servers"
}
assert len(operations) == len(endpoints), "one operation per endpoint (no endpoint declared twice)"


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


modules = sorted(
    m.name
    for tag in pkgutil.iter_modules(api.__path__)
    for m in pkgutil.iter_modules(importlib.import_module(f"{api.__name__}.{tag.name}").__path__)
)
assert modules == sorted(snake(o) for o in operations), (modules, operations)

called: set[str] = set()
network = NetworkId.PERPNET
client = AuthenticatedClient(base_url=base, token=key, auth_header_name="X-API-Key", prefix="")


def ok(module, **kwargs):
    """The parsed answer of a call that must answer 200."""
    called.add(module.__name__.rsplit(".", 1)[1])
    res = module.sync_detailed(client=kwargs.pop("via", client), **kwargs)
    assert res.status_code == HTTPStatus.OK, (module.__name__, res.status_code, res.content[:300])
    assert res.parsed is not None, module.__name__
    return res.parsed


public = Client(base_url=base)
called.update(["healthz", "readyz"])
assert healthz.sync_detailed(client=public).parsed.status == "ok"
assert readyz.sync_detailed(client=public).parsed.status == "ready"

# Both servers of the document answer the same.
networks = ok(list_networks)
alias = AuthenticatedClient(base_url=f"{base}/api/developer", token=key, auth_header_name="X-API-Key", prefix="")
assert ok(list_networks, via=alias).to_dict() == networks.to_dict()

markets = ok(list_markets, network=network, sort=MarketSort.OPENINTEREST, order="desc")
assert markets.items, "the demo has markets"
btc = ok(get_market, network=network, asset="BTC")
assert btc.symbol == "BTC" and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", btc.open_interest)

# A problem answer: typed, with the problem media type.
missing = get_market.sync_detailed(network=network, asset="NOPE", client=client)
assert missing.status_code == 404
assert missing.headers["content-type"] == "application/problem+json"
assert isinstance(missing.parsed, Problem), missing.parsed
assert missing.parsed.status == 404 and missing.parsed.type_.startswith("urn:") and "NOPE" in missing.parsed.detail

# One paged list to its end: every whale, as many as the list's total says.
seen: set[str] = set()
cursor = UNSET
total = None
while True:
    page = ok(list_wallets, network=network, size=SizeClass.WHALE, limit=200, cursor=cursor)
    total = page.total
    for w in page.items:
        assert w.address not in seen, f"{w.address} on two pages"
        seen.add(w.address)
    if not page.next_cursor:
        break
    cursor = page.next_cursor
assert len(seen) == total, (len(seen), total)

address = next(iter(seen))
ok(get_wallet, network=network, address=address)
ok(get_wallet_history, network=network, address=address, interval=HistoryInterval("1h"))
positions = ok(list_market_positions, network=network, asset="BTC", limit=10)
assert len(positions.items) == 10
today = datetime.datetime.now(datetime.timezone.utc).date()
ok(list_liquidity_levels, network=network, from_date=today, to_date=today, asset="BTC")
candles = ok(list_candles, network=network, asset="BTC", interval=Interval("1h"), limit=24)
assert candles.candles, "the demo has candles"
ok(get_coverage, network=network)
ok(get_market_cohorts, network=network, asset="BTC")
ok(get_market_history, network=network, asset="BTC", interval=HistoryInterval("1h"))
events = ok(list_position_events, network=network, limit=5)
assert events.items, "the demo has position events"

# The stream never ends a 200 answer, which this client reads whole: call it
# with a bad minValue, and its problem comes back typed.
called.add("stream_position_events")
bad = stream_position_events.sync_detailed(network=network, client=client, min_value="lots")
assert bad.status_code == 400 and isinstance(bad.parsed, Problem), bad.content[:300]
assert bad.parsed.invalid_params[0].name == "minValue", bad.parsed

assert sorted(called) == modules, sorted(set(modules) - called)
print(f"python client: {len(modules)} operation modules for {len(operations)} operations, all called; {total} whales paged to the end")
