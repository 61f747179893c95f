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
# HOLDERS=N runs the own-node set-up of scripts/bench-own-node.sh instead:
# N of the WALLETS hold positions and every address comes as a wallet list
# (set WEIGHT=1000000 with it). AT=end prints the heap held when `track` is
# stopped (kill -9 at the end: what a steady run holds) instead of the heap
# at its peak.
# heaptrack follows glibc's malloc, so the script builds the server
# without jemalloc (`--no-default-features`, into target/glibc) unless
# TRACK_BIN names a build. Needs heaptrack (apt-get install heaptrack)
# and python3.
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

AT=${AT:-peak}
release_workdir
if [ -z "${TRACK_BIN:-}" ]; then
  cargo build --release -q -p market-data-server --no-default-features \
    --target-dir "${CARGO_TARGET_DIR:-target}/glibc"
  TRACK_BIN=${CARGO_TARGET_DIR:-target}/glibc/release/market-data-server
fi
OWN_NODE=()
if [ -n "${HOLDERS:-}" ]; then
  start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --holders "$HOLDERS" --max-positions 7 \
    --weight-per-minute 0
  python3 -c "import sys
for i in range(int(sys.argv[1])): print(f'0x{0x5eed0000 + i:040x}')" "$WALLETS" > "$WORK/wallets.txt"
  OWN_NODE=(--concurrency 16 --wallets "$WORK/wallets.txt")
else
  start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute "$WEIGHT"
fi
track_db
RUST_LOG=info heaptrack -o "$WORK/heap" "$TRACK_BIN" track --database-url "$DB" \
  --info-url "http://$FAKE/info" --ws-url "ws://$FAKE_WS/ws" \
  --leaderboard-url "http://$FAKE/leaderboard" --weight-per-minute "$WEIGHT" "${OWN_NODE[@]}" \
  > "$WORK/heaptrack.out" 2>> "$WORK/track.log" &
HEAPTRACK=$!
sleep $((MINUTES * 60))
# The traced process runs the binary itself (heaptrack's wrapper is a shell).
pid=$(pgrep -f "^$TRACK_BIN track --database-url $DB" | head -n 1)
rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
if [ "$AT" = end ]; then kill -KILL "$pid"; else kill -TERM "$pid"; fi
wait "$HEAPTRACK" || true
registry=$(sqlite3 "$DB" 'select count(*) from (select address from wallet_registry union select address from wallet_registry_journal)' 2> /dev/null || echo '?')
served=$(sqlite3 "$DB" 'select wallet_count, position_count from snapshots order by version desc limit 1' 2> /dev/null || echo '?')
echo "after $MINUTES min: RSS $rss MB (peak $hwm MB, heaptrack's own overhead included); registry $registry entries; served wallets|positions $served"
KEEP=${KEEP:-/tmp/track-heap}
mkdir -p "$KEEP"
cp "$WORK"/heap.* "$KEEP/"
# The heap held when it was killed is what heaptrack calls leaked.
cost=$([ "$AT" = end ] && echo leaked || echo peak)
heaptrack_print -f "$WORK"/heap.*zst --flamegraph-cost-type "$cost" -F "$KEEP/$AT.txt" > /dev/null
echo "heaptrack data and the stacks ($AT) kept in $KEEP" >&2
# heaptrack names frames "function (file.rs)" (or with their module path):
# a frame is ours when its file is one of the project's sources.
OURS=$(git ls-files '*.rs' | xargs -n 1 basename | sort -u | grep -vxE 'mod.rs|lib.rs|main.rs' | tr '\n' ' ')
python3 - "$KEEP/$AT.txt" "$AT" "$OURS" <<'PY'
import re, sys
from collections import Counter
files = set(sys.argv[3].split())
path = re.compile(r"^(market_\w+|fake_exchange)::")
def ours(frame):
    m = re.search(r" \(([^()]+\.rs)\)$", frame)
    return bool(path.search(frame)) or (m is not None and m.group(1) in files)
by = Counter()
total = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    total += n
    frames = [re.sub(r"::h[0-9a-f]{16}$", "", f.strip()) for f in stack.split(";")]
    # The innermost frame of ours (the stack is outermost first).
    owner = next((f for f in reversed(frames) if ours(f)), "(no frame of ours)")
    by[owner[:110]] += n
at = "at the peak" if sys.argv[2] == "peak" else "held at the end"
print(f"heap {at}: {total / 2**20:.0f} MiB")
print(f"| allocated in (innermost function of ours) | MiB {at} | share |")
print("|---|---|---|")
for owner, n in by.most_common(20):
    print(f"| `{owner}` | {n / 2**20:.1f} | {100 * n / total:.0f} % |")
PY
