#!/usr/bin/env bash
# The figures of docs/outputs.md: a recording the size of the 13-minute MLP
# run (906,644 on-CPU samples, 2 threads) through `report --speedscope` and
# `report --trace` (bounded by default, and whole), sizes and times, and what
# Perfetto's protobuf format would weigh for the same spans.
#
#   bench/timeline_bench.sh [BUILD_DIR]        (default: build)
#
# RECORDING=FILE: a real recording to lengthen (default: the bundled MLP is
# recorded for ITERATIONS=300 iterations on OMP_NUM_THREADS=2); SAMPLES: the
# on-CPU samples wanted (default 906644). bench/tile_profile.c repeats the
# recording's samples, moved in time, so stacks and their order are real.
# Times are /usr/bin/time's: user CPU seconds are the figure to compare on a
# shared machine, wall seconds follow the machine's load.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dlflame=$build/cmd/dlflame
out=$build/bench
samples=${SAMPLES:-906644}

[ -x "$dlflame" ] || { echo "timeline_bench: no $dlflame; build first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "timeline_bench: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/tile_profile.c "$build/profile/libprofile.a" \
   "$build/libutil.a" -lz -lm -o "$out/tile_profile"

recording=${RECORDING:-}
if [ -z "$recording" ]; then
  recording=$out/mlp-short.data
  [ -x "$build/examples/mlp" ] || { echo "timeline_bench: no $build/examples/mlp: give RECORDING=FILE" >&2; exit 1; }
  OMP_NUM_THREADS=2 "$dlflame" record -o "$recording" -- "$build/examples/mlp" "${ITERATIONS:-300}" >/dev/null
fi
"$out/tile_profile" "$recording" "$out/long.data" "$samples"
echo "profile: $(stat -c %s "$out/long.data") bytes"

# one row: what, bytes written, wall s, user s, peak MB, the command
measure() {
  local what=$1 file=$2; shift 2
  /usr/bin/time -f '%e %U %M' -o "$out/time.txt" "$dlflame" report -i "$out/long.data" "$@" \
    -o "$file" 2> "$out/stderr.txt" || { cat "$out/stderr.txt" >&2; exit 1; }
  read -r wall user kb < "$out/time.txt"
  printf '%-28s %12d bytes  %7.2f s wall  %6.2f s user  %5d MB  dlflame report %s -o %s\n' \
    "$what" "$(stat -c %s "$file")" "$wall" "$user" $((kb / 1024)) "$*" "$(basename "$file")"
  grep -h 'longest spans' "$out/stderr.txt" || true
}
measure 'speedscope' "$out/long.speedscope.json" --speedscope
measure 'speedscope --wall' "$out/long-wall.speedscope.json" --speedscope --wall
measure 'trace (bounded, default)' "$out/long.trace.json" --trace
measure 'trace --max-spans 0 (whole)' "$out/long-all.trace.json" --trace --max-spans 0
measure 'svg (for comparison)' "$out/long.svg" --svg
spans=$(grep -c '"ph":"X"' "$out/long-all.trace.json")
echo "whole trace: $spans spans"
rm -f "$out/long-all.trace.json" # half a gigabyte

# Perfetto's protobuf for the same spans: measured on the short recording's
# whole trace (the JSON of the long one is too big to parse in Python here)
"$dlflame" report -i "$recording" --trace --max-spans 0 -o "$out/short.trace.json" 2>/dev/null
python3 bench/perfetto_size.py "$out/short.trace.json" "$out/short.pftrace"
