#!/usr/bin/env bash
# dlflame's own CPU while it records the MLP: the CPU time of the dlflame
# process alone (`perf stat --no-inherit`, so not the trainer's), for a short
# and a long run; the difference over the difference in samples is what
# each sample costs dlflame, the rest is fixed (kallsyms, naming, writing).
#
#   bench/selfcost.sh                    # 2 OpenMP threads, 750 and 3000 iterations
#   OMP_NUM_THREADS=1 bench/selfcost.sh
#   BUILD=/tmp/build-old bench/selfcost.sh   # another build, e.g. to compare in one session
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
SHORT=${SHORT:-750}
LONG=${LONG:-3000}
ROUNDS=${ROUNDS:-3}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
MLP=$BUILD/examples/mlp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# prints "cpu_ms samples" for one run
one() {
  perf stat --no-inherit -e task-clock -x, -o "$tmp/stat" -- \
    "$DL" record -o "$tmp/d.data" -- "$MLP" "$1" 2>"$tmp/err" >/dev/null
  cpu=$(awk -F, '/task-clock/ {print $1}' "$tmp/stat")
  n=$(sed -n 's/^dlflame: [0-9.]* s, \([0-9]*\) samples.*/\1/p' "$tmp/err")
  echo "$cpu $n"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$tmp/s"
: > "$tmp/l"
for ((r = 1; r <= ROUNDS; r++)); do
  one "$SHORT" >> "$tmp/s"
  one "$LONG" >> "$tmp/l"
done
sc=$(cut -d' ' -f1 "$tmp/s" | median); sn=$(cut -d' ' -f2 "$tmp/s" | median)
lc=$(cut -d' ' -f1 "$tmp/l" | median); ln=$(cut -d' ' -f2 "$tmp/l" | median)
echo "dlflame record of mlp ($BUILD), OMP_NUM_THREADS=$OMP_NUM_THREADS, median of $ROUNDS runs each"
printf '  %5s iterations: %6d samples, dlflame CPU %7.1f ms\n' "$SHORT" "$sn" "$sc" "$LONG" "$ln" "$lc"
awk -v sc="$sc" -v lc="$lc" -v sn="$sn" -v ln="$ln" 'BEGIN {
  per = (lc - sc) / (ln - sn) * 1000
  printf "  per sample: %.1f us; fixed: %.0f ms\n", per, sc - per * sn / 1000 }'
