#!/usr/bin/env bash
# Where `track`'s memory goes: runs `track` (release) under heaptrack against
# the simulated exchange of tests/fake-exchange for MINUTES, stops it, and
# prints the heap at its peak by the structure that holds it (the innermost
# function of ours on each allocation's stack) with the registry size and
# the wallets served, for a table in docs/ingest.md. Not run by CI.
#
#   scripts/track-heap.sh [MINUTES] [WALLETS]      (defaults: 20, 200000)
#
# WEIGHT=N sets the budget of both sides (default 12000, an own node's
# budget at which every wallet named is read within a minute), PORT=N
# moves its two ports (default 18931-18932), TRACK_BIN runs another build.
# Needs heaptrack (apt-get install heaptrack) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-20}
WALLETS=${2:-200000}
PORT=${PORT:-18931}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
WEIGHT=${WEIGHT:-12000}
source scripts/common.sh
require heaptrack heaptrack_print python3 curl

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute "$WEIGHT"
track_db
RUST_LOG=info heaptrack -o "$WORK/heap" "$TRACK_BIN" track --database-url "$DB" \
  --info-url "http://$FAKE/info" --ws-url "ws://$FAKE_WS/ws" \
  --leaderboard-url "http://$FAKE/leaderboard" --weight-per-minute "$WEIGHT" \
  > "$WORK/heaptrack.out" 2>> "$WORK/track.log" &
sleep $((MINUTES * 60))
# The traced process is heaptrack's child.
pid=$(pgrep -f "market-data-server track --database-url $DB" | head -n 1)
rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
kill -TERM "$pid"
wait || true
registry=$(sqlite3 "$DB" 'select count(*) from wallet_registry' 2> /dev/null || echo '?')
served=$(sqlite3 "$DB" 'select wallet_count, position_count from snapshots order by version desc limit 1' 2> /dev/null || echo '?')
echo "after $MINUTES min: RSS $rss MB (peak $hwm MB, heaptrack's own overhead included); registry $registry entries; served wallets|positions $served"
heaptrack_print -f "$WORK"/heap.*zst --flamegraph-cost-type peak -F "$WORK/peak.txt" > /dev/null
python3 - "$WORK/peak.txt" <<'PY'
import re, sys
from collections import Counter
ours = re.compile(r"(market_\w+|fake_exchange)::")
by = Counter()
total = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    total += n
    frames = stack.split(";")
    owner = next((f for f in reversed(frames) if ours.search(f)), "(outside our crates)")
    owner = re.sub(r"<.*?>|\(.*?\)|\{\{closure\}\}", "", owner).strip(":")
    by[owner] += n
print(f"heap at the peak: {total / 2**20:.0f} MiB")
print("| allocated in | MiB at the peak | share |")
print("|---|---|---|")
for owner, n in by.most_common(15):
    print(f"| `{owner}` | {n / 2**20:.1f} | {100 * n / total:.0f} % |")
PY
