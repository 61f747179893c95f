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
HEAPTRACK=$!
sleep $((MINUTES * 60))
# The traced process runs the binary itself (heaptrack's wrapper is a shell).
pid=$(pgrep -f "^$TRACK_BIN track --database-url $DB" | head -n 1)
rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
kill -TERM "$pid"
wait "$HEAPTRACK" || true
registry=$(sqlite3 "$DB" 'select count(*) from wallet_registry' 2> /dev/null || echo '?')
served=$(sqlite3 "$DB" 'select wallet_count, position_count from snapshots order by version desc limit 1' 2> /dev/null || echo '?')
echo "after $MINUTES min: RSS $rss MB (peak $hwm MB, heaptrack's own overhead included); registry $registry entries; served wallets|positions $served"
KEEP=${KEEP:-/tmp/track-heap}
mkdir -p "$KEEP"
cp "$WORK"/heap.* "$KEEP/"
heaptrack_print -f "$WORK"/heap.*zst --flamegraph-cost-type peak -F "$KEEP/peak.txt" > /dev/null
echo "heaptrack data and the peak's stacks kept in $KEEP" >&2
python3 - "$KEEP/peak.txt" <<'PY'
import re, sys
from collections import Counter
ours = re.compile(r"^(market_\w+|fake_exchange)::")
by = Counter()
total = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    total += n
    frames = [re.sub(r"::h[0-9a-f]{16}$", "", f.strip()) for f in stack.split(";")]
    # The innermost frame of ours (the stack is outermost first).
    owner = next((f for f in reversed(frames) if ours.search(f)), "(no frame of ours)")
    by[owner[:110]] += n
print(f"heap at the peak: {total / 2**20:.0f} MiB")
print("| allocated in (innermost function of ours) | MiB at the peak | share |")
print("|---|---|---|")
for owner, n in by.most_common(20):
    print(f"| `{owner}` | {n / 2**20:.1f} | {100 * n / total:.0f} % |")
PY
