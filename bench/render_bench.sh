#!/usr/bin/env bash
# The figure in the README: `dlflame report --svg` of a 1M-sample profile in
# at most 1 s and 200 MB peak memory, measured with /usr/bin/time -v.
#
#   bench/render_bench.sh [BUILD_DIR]     (default: build)
#
# Exits 1 when either bound is exceeded.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dlflame=$build/cmd/dlflame
out=$build/bench
samples=${SAMPLES:-1000000}
max_s=${MAX_SECONDS:-1.0}
max_kb=${MAX_KB:-204800}

[ -x "$dlflame" ] || { echo "render_bench: no $dlflame; run scripts/setup.sh first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "render_bench: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/gen_profile.c "$build/profile/libprofile.a" \
   "$build/libutil.a" -lz -lm -o "$out/gen_profile"
"$out/gen_profile" "$out/big.data" "$samples"

best_s=999; best_kb=0
for run in 1 2 3; do
  /usr/bin/time -v "$dlflame" report -i "$out/big.data" --svg -o "$out/big.svg" \
    2> "$out/time.txt" >/dev/null
  s=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); v = 0;
        for (i = 1; i <= n; i++) v = v * 60 + t[i]; print v }' "$out/time.txt")
  kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$out/time.txt")
  if awk -v a="$s" -v b="$best_s" 'BEGIN { exit !(a < b) }'; then best_s=$s; fi
  [ "$kb" -gt "$best_kb" ] && best_kb=$kb
done
frames=$(grep -c '<g class="f"' "$out/big.svg" || true)
printf 'render_bench: %s samples, %s bytes of profile -> %s frames drawn: best of 3 %.2f s, peak %d MB\n' \
  "$samples" "$(stat -c %s "$out/big.data")" "$frames" "$best_s" $((best_kb / 1024))
awk -v s="$best_s" -v max="$max_s" 'BEGIN { exit !(s <= max) }' ||
  { echo "render_bench: slower than ${max_s} s" >&2; exit 1; }
[ "$best_kb" -le "$max_kb" ] || { echo "render_bench: more than $((max_kb / 1024)) MB" >&2; exit 1; }
