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
