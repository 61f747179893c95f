#!/usr/bin/env bash
# The whole exchange from an own node: `track` with an own node's budget
# (`--weight-per-minute 1000000`) against the simulated exchange of
# tests/fake-exchange grown to WALLETS wallets (HOLDERS of them with 1 to 7
# positions, about 4 on average; the others empty), every one trading, with
# `serve` beside it on the same SQLite file. The wallets come to `track` as
# an operator's own node lists them: a wallet list of every address
# (`--wallets`; the leaderboard keeps its real size, 30,000 rows: the
# exchange's document of every wallet would be far over the 256 MiB `track`
# reads of it). Once a minute it prints a markdown row from the two processes' logs
# and /proc: the registry, the wallets and positions served, the last
# publish (wallets changed, wall time, CPU of the publishing thread), and
# each process's resident memory and the server's CPU to apply the last
# publish. At the end it starts a second `serve` and times it until /healthz
# answers, with its resident memory at that moment and its peak (it starts
# from the version the first one saved, `--saved-version`, when it can).
# Not run by CI.
#
#   scripts/bench-own-node.sh [MINUTES] [WALLETS] [HOLDERS]   (defaults: 60, 1000000, 300000)
#
# PORT=N moves its four ports (default 18961-18964); TRACK_BIN runs another
# build's `track`, SERVE_BIN another build's `serve` (both servers);
# SECOND_BINS the builds of the second server, started in turn (below);
# WHOLE_BINS those of the last, which loads whole (below);
# KEEP_DB=FILE keeps a copy of `track`'s database at the end (SQLite's
# online backup, consistent while `track` writes), to time a migration on
# it, say.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-60}
WALLETS=${2:-1000000}
HOLDERS=${3:-300000}
PORT=${PORT:-18961}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
SERVE=127.0.0.1:$((PORT + 2))
SERVE2=127.0.0.1:$((PORT + 3))
source scripts/common.sh
require curl python3

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --holders "$HOLDERS" --max-positions 7 \
  --weight-per-minute 0
# The fake's addresses (tests/fake-exchange: `address(i)`).
python3 -c "import sys
for i in range(int(sys.argv[1])): print(f'0x{0x5eed0000 + i:040x}')" "$WALLETS" > "$WORK/wallets.txt"
track_db
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 1000000 --concurrency 16 --wallets "$WORK/wallets.txt"
SERVE_BIN=${SERVE_BIN:-$BIN}
RUST_LOG=info "$SERVE_BIN" serve --bind "$SERVE" --database-url "$DB" --access-log false 2> "$WORK/serve.log" &
SERVER=$!

rss() { awk "/$2/ {print int(\$2 / 1024)}" "/proc/$1/status"; }
echo "| minute | registry | served wallets / positions | last publish: changed, wall ms, CPU ms | track RSS MB | serve RSS MB | serve CPU of the last apply |"
echo "|---|---|---|---|---|---|---|"
for minute in $(seq 1 "$MINUTES"); do
  sleep 60
  publish=$(grep "published data version" "$WORK/track.log" | tail -n 1 || true)
  apply=$(grep "serving data version" "$WORK/serve.log" | tail -n 1 || true)
  python3 - "$minute" "$publish" "$apply" "$(rss $TRACK VmRSS)" "$(rss $SERVER VmRSS)" <<'PY'
import re, sys
minute, publish, apply, track_rss, serve_rss = sys.argv[1:]
def find(pattern, text, default="?"):
    m = re.search(pattern, text)
    return m.groups() if m else (default,) * re.compile(pattern).groups
wallets, changed, positions, registry = find(r"(\d+) wallets \((\d+) changed.*?(\d+) positions; registry (\d+)", publish)
wall, cpu = find(r"; (\d+) ms, CPU (\S+) ms", publish)
how, apply_cpu = find(r": (applied \d+ changed|loaded whole).*process CPU (\d+) ms", apply)
print(f"| {minute} | {registry} | {wallets} / {positions} | {changed}, {wall}, {cpu} | {track_rss} | {serve_rss} | {apply_cpu} ms ({how}) |")
PY
done
echo "track peak RSS: $(rss $TRACK VmHWM) MB; serve peak RSS: $(rss $SERVER VmHWM) MB" >&2
# All of `track`'s CPU (its checkpoints' thread and every other one too),
# and the size its write-ahead log reached: what the publishes' own CPU
# leaves out.
awk -v hz="$(getconf CLK_TCK)" '{printf "track CPU, all threads: user %d ms, system %d ms\n", $14 * 1000 / hz, $15 * 1000 / hz}' "/proc/$TRACK/stat" >&2
echo "write-ahead log: $(( $(stat -c %s "$DB-wal" 2> /dev/null || echo 0) / 1000000 )) MB" >&2
# Every publish of the run, not only each minute's last: what two builds'
# runs compare, since one publish's CPU follows how many wallets it carries.
python3 - "$WORK/track.log" <<'PY' >&2
import re, sys
rows = [re.search(r"\((\d+) changed.*?; (\d+) ms, CPU (\d+) ms", line)
        for line in open(sys.argv[1]) if "published data version" in line]
rows = [tuple(map(int, m.groups())) for m in rows if m]
print(f"publishes: {len(rows)}; wallets changed {sum(r[0] for r in rows)}; "
      f"wall {sum(r[1] for r in rows)} ms; CPU {sum(r[2] for r in rows)} ms")
PY
# SECOND_BINS (default: the server's binary) lists the builds to start
# one after another from the saved version, each killed once ready (so
# that none saves at its stop): two builds taking turns compare on the
# same file and the same `track`. SECOND_EVERY=N waits N seconds before
# each (default 0): the file is then sometimes a publish or more behind,
# and a start catches up from it.
read -ra seconds <<< "${SECOND_BINS:-}"
[ ${#seconds[@]} -gt 0 ] || seconds=("$SERVE_BIN")
for second in "${seconds[@]}"; do
  sleep "${SECOND_EVERY:-0}"
  start2=$(date +%s%N)
  RUST_LOG=info "$second" serve --bind "$SERVE2" --database-url "$DB" --access-log false 2> "$WORK/serve2.log" &
  SERVER2=$!
  until curl -sf "http://$SERVE2/healthz" > /dev/null; do sleep 0.05; done
  echo "second serve ($second): ready $(( ($(date +%s%N) - start2) / 1000000 )) ms after start, resident $(rss $SERVER2 VmRSS) MB, peak $(rss $SERVER2 VmHWM) MB" >&2
  grep -E "serving data version|read data version|to the saved version|not starting from|is not one of" "$WORK/serve2.log" | tail -n 3 >&2
  kill -9 "$SERVER2"
  wait "$SERVER2" 2> /dev/null || true
done
# The same start loading the newest version whole, for a same-run ratio:
# WHOLE_BINS (default: the server's binary) lists the builds, started in
# turn and each killed once ready.
read -ra wholes <<< "${WHOLE_BINS:-}"
[ ${#wholes[@]} -gt 0 ] || wholes=("$SERVE_BIN")
for whole in "${wholes[@]}"; do
  start3=$(date +%s%N)
  RUST_LOG=info "$whole" serve --bind "$SERVE2" --database-url "$DB" --access-log false --saved-version none 2> "$WORK/serve3.log" &
  SERVER3=$!
  until curl -sf "http://$SERVE2/healthz" > /dev/null; do sleep 0.05; done
  echo "a serve loading whole ($whole): ready $(( ($(date +%s%N) - start3) / 1000000 )) ms after start, resident $(rss $SERVER3 VmRSS) MB, peak $(rss $SERVER3 VmHWM) MB" >&2
  grep "serving data version" "$WORK/serve3.log" | tail -n 1 >&2
  kill -9 "$SERVER3"
  wait "$SERVER3" 2> /dev/null || true
done
if [ -n "${KEEP_DB:-}" ]; then
  python3 -c "import sqlite3, sys
sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" "$DB" "$KEEP_DB"
  echo "kept track's database as $KEEP_DB" >&2
fi
