#!/usr/bin/env bash
# Resident memory of `track` holding a registry of WALLETS listed wallets and
# (nearly) nothing else: the simulated exchange of tests/fake-exchange with
# WALLETS wallets, none holding a position, every address on the operator's
# wallet list, and a budget of 60 weight a minute, so that almost no wallet
# is read. Prints `track`'s resident memory and its peak at 60, 120 and 180
# s. Not run by CI.
#
#   scripts/registry-memory.sh [WALLETS]   (default 1000000)
#
# PORT=N moves its two ports (default 18981-18982); TRACK_BIN runs another
# build's `track`, to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
WALLETS=${1:-1000000}
PORT=${PORT:-18981}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
source scripts/common.sh
require curl python3

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --holders 0 --weight-per-minute 0
python3 -c "import sys
for i in range(int(sys.argv[1])): print(f'0x{0x5eed0000 + i:040x}')" "$WALLETS" > "$WORK/wallets.txt"
track_db
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 60 --wallets "$WORK/wallets.txt"
for s in 60 120 180; do
  sleep 60
  echo "$s s: resident $(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$TRACK/status") MB, peak $(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$TRACK/status") MB"
done
