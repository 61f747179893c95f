# Helpers shared by the benchmark scripts (sourced, not run).

# require TOOL…: exits with a hint when a tool is missing.
require() {
  local tool
  for tool in "$@"; do
    command -v "$tool" > /dev/null || { echo "$tool is missing: apt-get install $tool" >&2; exit 1; }
  done
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# release_workdir: builds the release binaries of the server and the fake
# exchange and sets RELEASE, BIN (the server) and WORK (a temporary
# directory, removed at exit, when every background job is killed too).
release_workdir() {
  cargo build --release -q -p market-data-server -p fake-exchange
  RELEASE=${CARGO_TARGET_DIR:-target}/release
  BIN=$RELEASE/market-data-server
  WORK=$(mktemp -d)
  trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT
}

# start_fake HTTP WS ARGS…: starts the fake exchange (after release_workdir)
# with its info API on HTTP and its WebSocket on WS, waits until it answers
# and prints its first line.
start_fake() {
  local http=$1 ws=$2
  shift 2
  "$RELEASE/fake-exchange" --bind "$http" --ws-bind "$ws" "$@" > "$WORK/fake.log" 2>&1 &
  until curl -sf "http://$http/truth" > /dev/null; do sleep 0.5; done
  head -n 1 "$WORK/fake.log" >&2
}

# track_db: migrates a fresh SQLite database for `track` (after
# release_workdir) and sets DB and TRACK_BIN (this build's server binary,
# unless TRACK_BIN already names another build's, to compare).
track_db() {
  DB=$WORK/track.db
  TRACK_BIN=${TRACK_BIN:-$BIN}
  "$TRACK_BIN" migrate --database-url "$DB" > /dev/null
}

# start_track FAKE FAKE_WS ARGS…: starts `track` (after track_db) against
# the fake exchange's info API on FAKE and its WebSocket on FAKE_WS, with
# ARGS added; its log is appended to WORK/track.log and its pid set in TRACK.
# TRACK_LOG sets its RUST_LOG (default info; the publish's steps:
# TRACK_LOG=info,market_store::steps=debug,market_tracker::publish=debug).
start_track() {
  local http=$1 ws=$2
  shift 2
  RUST_LOG=${TRACK_LOG:-info} "$TRACK_BIN" track --database-url "$DB" --info-url "http://$http/info" \
    --ws-url "ws://$ws/ws" --leaderboard-url "http://$http/leaderboard" "$@" 2>> "$WORK/track.log" &
  TRACK=$!
}
