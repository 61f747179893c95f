#!/usr/bin/env bash
# `track` (release, default settings) against the simulated exchange of
# tests/fake-exchange, killed with `kill -9` and restarted RESTARTS times,
# evenly over MINUTES. It then checks two things against what the
# simulation really did:
#
# - whale staleness: every 10 s from minute 3 on (restarts included), the
#   age of the last read of each whale (1,000,000 USD or more over every dex,
#   from the fake's /whales) that the registry holds, read from the database;
#   it prints each whale's p99 of those ages, their maximum, and the p99 over
#   every sample;
# - invented history: every position event `track` wrote that is not a first
#   observation must match a change of that wallet's position in that coin
#   that the fake made (its /journal) at or before the event. It prints the
#   events of each kind and the ones that match no change.
#
#   scripts/track-restarts.sh [MINUTES] [RESTARTS] [WALLETS]   (defaults: 20, 5, 20000)
#
# PORT=N moves its two ports (default 18921-18922), to run two at once.
# TRACK_BIN=PATH runs another build's server binary as `track` (an earlier
# commit's, to compare) against this build's fake exchange.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
MINUTES=${1:-20}
RESTARTS=${2:-5}
WALLETS=${3:-20000}
PORT=${PORT:-18921}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
require curl python3

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS"
track_db
STARTED_MS=$(date +%s%3N)
start_track "$FAKE" "$FAKE_WS"

# The sampler: the age of each whale's last read, every 10 s from minute 3.
python3 - "$DB" "http://$FAKE/whales" "$WORK/ages.jsonl" "$MINUTES" <<'PY' &
import json, sqlite3, sys, time, urllib.request
from datetime import datetime, timezone
db, whales_url, out, minutes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = time.time()
time.sleep(180)
with open(out, "w") as f:
    while time.time() - start < minutes * 60:
        whales = set(json.load(urllib.request.urlopen(whales_url)))
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        # The registry's journal (the entries saved since its last merge)
        # laid over its table, a later row of an address over an earlier one.
        rows = dict(con.execute("SELECT address, last_read_at FROM wallet_registry"))
        rows.update(con.execute(
            "SELECT address, last_read_at FROM wallet_registry_journal ORDER BY seq"))
        rows = rows.items()
        con.close()
        now = datetime.now(timezone.utc)
        ages, unread = {}, 0
        for address, read in rows:
            if address not in whales:
                continue
            if read is None:
                unread += 1
                continue
            at = datetime.fromisoformat(read).replace(tzinfo=timezone.utc)
            ages[address] = (now - at).total_seconds()
        f.write(json.dumps({"t": time.time() - start, "ages": ages, "unread": unread}) + "\n")
        f.flush()
        time.sleep(10)
PY
SAMPLER=$!

STEP=$(( MINUTES * 60 / (RESTARTS + 1) ))
for i in $(seq 1 "$RESTARTS"); do
  sleep "$STEP"
  kill -9 "$TRACK"
  wait "$TRACK" 2> /dev/null || true
  echo "kill -9 number $i at $(( i * STEP )) s" >&2
  sleep 2
  start_track "$FAKE" "$FAKE_WS"
done
wait "$SAMPLER"
kill "$TRACK"

python3 - "$DB" "$WORK/ages.jsonl" "http://$FAKE/journal" "$STARTED_MS" <<'PY'
import collections, json, sqlite3, sys, urllib.request
db, ages_file, journal_url, started = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]
per_whale = collections.defaultdict(list)
every, unread = [], 0
for line in open(ages_file):
    s = json.loads(line)
    unread = max(unread, s["unread"])
    for a, age in s["ages"].items():
        per_whale[a].append(age)
        every.append(age)
whale_p99 = {a: p99(v) for a, v in per_whale.items()}
worst = max(whale_p99.items(), key=lambda kv: kv[1])
print(f"whales sampled: {len(per_whale)} ({len(every)} samples; at most {unread} whales not read yet in a sample)")
print(f"whale staleness: p99 over every sample {p99(every):.0f} s; per whale p99, max {worst[1]:.0f} s ({worst[0]}); "
      f"whales whose p99 exceeds 300 s: {sum(1 for v in whale_p99.values() if v > 300)}")

journal = json.load(urllib.request.urlopen(journal_url))
changed = collections.defaultdict(list)
for ms, address, coin, before, after in journal:
    changed[(address, coin)].append(ms)
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
events = con.execute("SELECT at, address, symbol, kind, body FROM position_events WHERE at >= ?", (started,)).fetchall()
kinds, invented, first = collections.Counter(), collections.Counter(), 0
examples = []
for at, address, symbol, kind, body in events:
    if json.loads(body)["firstObservation"]:
        first += 1
        continue
    kinds[kind] += 1
    if not any(ms <= at for ms in changed.get((address, symbol), [])):
        invented[kind] += 1
        if len(examples) < 5:
            examples.append((at, address, symbol, kind))
print(f"position events: {first} first observations; {dict(kinds)} otherwise")
print(f"events that match no change of the simulation: {sum(invented.values())} {dict(invented)}")
for e in examples:
    print("  e.g.", e)
PY
echo "track log: $(grep -c 'published data version' "$WORK/track.log" || true) publishes applied, $(grep -c 'publish not applied' "$WORK/track.log" || true) not applied, $(grep -c 'incomplete\|without a mark' "$WORK/track.log" || true) reads without a mark" >&2
