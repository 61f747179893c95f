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
  trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$WORK"' EXIT
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
