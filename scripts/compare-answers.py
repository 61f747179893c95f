#!/usr/bin/env python3
"""Asks two running servers the same pages and reports any that differ.

    scripts/compare-answers.py URL_A URL_B KEY

URL_A and URL_B are base URLs (http://127.0.0.1:8080); KEY is a token both
accept (tokens live in the database, so two servers on the same database
share them). It walks every whale-positions page of five markets in all
three directions, 30 pages of four wallet orders, the market list, market
detail and coverage, and compares the bodies byte for byte. Used to check
that a change to how a server loads or renders a version changes nothing it
serves (docs/performance.md). Exits 1 when a page differs.
"""
import json
import sys
import urllib.parse
import urllib.request


def main() -> int:
    base_a, base_b, key = sys.argv[1:4]

    def get(base: str, path: str) -> bytes:
        request = urllib.request.Request(
            f"{base}/v1/networks/perpnet/{path}", headers={"X-API-Key": key}
        )
        with urllib.request.urlopen(request) as response:
            return response.read()

    def walk(path: str, pages: int) -> dict:
        bodies = {}
        for base in (base_a, base_b):
            bodies[base], cursor = [], None
            for _ in range(pages):
                query = f"&cursor={urllib.parse.quote(cursor)}" if cursor else ""
                body = get(base, path + query)
                bodies[base].append(body)
                cursor = json.loads(body).get("nextCursor")
                if not cursor:
                    break
        return bodies

    compared = differ = items = 0
    lists = [
        f"markets/{urllib.parse.quote(s)}/whale-positions?{q}limit=200"
        for s in ["BTC", "ETH", "SOL", "xyz:TSLA", "HYPE"]
        for q in ["", "direction=long&", "direction=short&"]
    ]
    wallets = [
        "wallets?limit=200",
        "wallets?sort=totalPositionValue&limit=200",
        "wallets?sort=accountTotalValue&order=asc&limit=200",
        "wallets?size=whale&limit=200",
    ]
    for path, pages in [(p, 100_000) for p in lists] + [(w, 30) for w in wallets]:
        bodies = walk(path, pages)
        compared += len(bodies[base_a])
        items += sum(len(json.loads(b)["items"]) for b in bodies[base_a])
        if bodies[base_a] != bodies[base_b]:
            differ += 1
            print("differs:", path)
    for path in ["markets?sort=openInterest", "markets/BTC", "markets/HYPE", "coverage"]:
        compared += 1
        if get(base_a, path) != get(base_b, path):
            differ += 1
            print("differs:", path)
    print(f"{compared} pages compared ({items} list items), {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
