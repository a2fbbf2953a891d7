#!/usr/bin/env bash
# What a probe costs per call: the calls fixture's loop of N calls of a tiny
# function, each followed by GAP microseconds of work (tests/fixtures/calls.c,
# "many N GAP": 10,000 calls a second by default), timed by itself, unrecorded,
# under `dlflame record --probe quick` and under `perf record` of the same
# entry and return uprobes (perf probe -x FIXTURE quick / quick%return), in
# the same session, alternating; medians. The per-call cost is the extra
# time over N.
#
#   bench/probes.sh                     # N = 20000, GAP = 100 us, 5 rounds
#   N=50000 GAP=20 ROUNDS=3 bench/probes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
GAP=${GAP:-100}
ROUNDS=${ROUNDS:-5}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
FX=$BUILD/tests/fixtures/calls
tmp=$(mktemp -d)
cleanup() { perf probe -q -d 'probe_calls:*' 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$FX" ] || { echo "build the fixtures first ($FX)" >&2; exit 1; }
perf probe -q -d 'probe_calls:*' 2>/dev/null || true
perf probe -q -x "$FX" quick
perf probe -q -x "$FX" 'quick%return'

secs() { sed -n 's/^calls: [0-9]* calls in \([0-9.]*\) s$/\1/p'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$tmp/none"; : > "$tmp/dlflame"; : > "$tmp/perf"; : > "$tmp/perfd"
for ((r = 1; r <= ROUNDS; r++)); do
  "$FX" many "$N" "$GAP" | secs >> "$tmp/none"
  "$DL" record --no-offcpu --probe quick -o "$tmp/d.data" -- "$FX" many "$N" "$GAP" 2>"$tmp/err" |
    secs >> "$tmp/dlflame"
  grep -q "^dlflame: $N probed calls" "$tmp/err" || { echo "dlflame counted: $(grep 'probed calls' "$tmp/err")" >&2; exit 1; }
  perf record -q -e probe_calls:quick -e probe_calls:quick__return -o "$tmp/p.data" -- \
    "$FX" many "$N" "$GAP" 2>/dev/null | secs >> "$tmp/perf"
  perf record -q --call-graph dwarf,8192 -e probe_calls:quick -e probe_calls:quick__return \
    -o "$tmp/p.data" -- "$FX" many "$N" "$GAP" 2>/dev/null | secs >> "$tmp/perfd"
done
t0=$(median < "$tmp/none"); td=$(median < "$tmp/dlflame"); tp=$(median < "$tmp/perf")
tq=$(median < "$tmp/perfd")
awk -v n="$N" -v gap="$GAP" -v t0="$t0" -v td="$td" -v tp="$tp" -v tq="$tq" -v r="$ROUNDS" 'BEGIN {
  printf "%d calls of a tiny function, %s us apart, median of %d rounds: unprobed %.3f s\n", n, gap, r, t0
  printf "  dlflame --probe (entry + return, 8 KiB stack at entry): %.3f s, %.2f us per call\n", td, (td - t0) / n * 1e6
  printf "  perf record -e probe entry + return (no stack):          %.3f s, %.2f us per call\n", tp, (tp - t0) / n * 1e6
  printf "  perf record --call-graph dwarf,8192 -e the same:         %.3f s, %.2f us per call\n", tq, (tq - t0) / n * 1e6 }'
