"""Schemathesis hooks: keep generated requests within constraints that an
OpenAPI document cannot state.

- Keyset cursors are opaque: only the server can mint a valid one, so
  generated schema-valid requests that carry an invented `cursor` on the opaque-cursor
  endpoints are skipped (cursor validation has its own black-box tests).
- liquidity-levels needs toDate >= fromDate and a window of at most 90 days.
- candles need the start (`cursor` or `from`) not after `to`, and history
  and position-events `from` not after `to` (`to` defaults to now).
The event stream is left out by the CI command (a 200 answer never ends).
Everything else the document states is fuzzed as generated.
"""
import datetime

import schemathesis

OPAQUE_CURSOR_PATHS = (
    "/whale-positions",
    "/wallets",
    "/liquidity-levels",
    "/history",
    "/position-events",
)


def _instant_ms(value):
    if not isinstance(value, str):
        return None
    if value.isdigit():
        return int(value)
    try:
        t = datetime.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    return int(t.timestamp() * 1000)


def _is_negative(case):
    meta = getattr(case, "meta", None)
    mode = getattr(getattr(meta, "generation", None), "mode", None)
    return str(getattr(mode, "value", mode)).lower() == "negative"


@schemathesis.hook
def filter_case(ctx, case):
    """Applies to every phase (examples, coverage, fuzzing, stateful).
    Negative cases (schema-violating on purpose) are never dropped."""
    query = case.query
    if not query or _is_negative(case):
        return True
    path = case.operation.path
    if "cursor" in query and path.endswith(OPAQUE_CURSOR_PATHS):
        return False
    f, t = query.get("fromDate"), query.get("toDate")
    if isinstance(f, str) and isinstance(t, str):
        try:
            fd, td = datetime.date.fromisoformat(f), datetime.date.fromisoformat(t)
        except ValueError:
            return True
        if td < fd or (td - fd).days > 89:
            return False
    if path.endswith(("/history", "/position-events")):
        start = _instant_ms(query.get("from"))
        end = _instant_ms(query.get("to")) if "to" in query else int(datetime.datetime.now().timestamp() * 1000)
        if start is not None and end is not None and start > end:
            return False
    if path.endswith("/candles"):
        start = _instant_ms(query.get("cursor")) if "cursor" in query else _instant_ms(query.get("from"))
        end = _instant_ms(query.get("to")) if "to" in query else int(datetime.datetime.now().timestamp() * 1000)
        if start is not None and end is not None and start > end:
            return False
    return True
