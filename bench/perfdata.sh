#!/usr/bin/env bash
# From a DWARF perf.data to a flame graph: dlflame vs perf script (+ FlameGraph when
# FLAMEGRAPH_DIR points at a checkout) vs perf report, on the same file in one run;
# plus file sizes of perf.data and dlflame.data for the same workload.
#
#   bench/perfdata.sh                       # mlp, 1500 iterations
#   ITER=3000 FLAMEGRAPH_DIR=~/FlameGraph bench/perfdata.sh
#   ITER=6000 OMP_NUM_THREADS=2 PERF_STACK=32768 bench/perfdata.sh   # a ~600 MB perf.data
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${ITER:-1500}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DL=$(pwd)/build/cmd/dlflame
MLP=$(pwd)/build/examples/mlp
M=$(pwd)/bench/measure.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

perf record -q --call-graph "dwarf,${PERF_STACK:-8192}" -F 999 -o perf.data -- "$MLP" "$ITER" >/dev/null 2>&1
"$DL" record -o dlflame.data -- "$MLP" "$ITER" >/dev/null 2>&1
samples=$(perf script -i perf.data -F tid -G 2>/dev/null | wc -l)

{
  $M "dlflame report -i perf.data --svg" -- "$DL" report -i perf.data --svg -o a.svg
  $M "dlflame report -i perf.data --folded" -- "$DL" report -i perf.data --folded -o a.folded
  $M "perf script" -- sh -c "perf script -i perf.data > script.txt 2>/dev/null"
  if [ -n "${FLAMEGRAPH_DIR:-}" ]; then
    $M "perf script | stackcollapse-perf.pl | flamegraph.pl" -- sh -c \
      "perf script -i perf.data 2>/dev/null | '$FLAMEGRAPH_DIR/stackcollapse-perf.pl' | '$FLAMEGRAPH_DIR/flamegraph.pl' > b.svg"
  fi
  $M "perf report --stdio" -- sh -c "perf report -i perf.data --stdio > report.txt 2>/dev/null"
  $M "dlflame report --svg (own profile)" -- "$DL" report -i dlflame.data --svg -o c.svg
} > times.tsv

echo "perf.data of mlp $ITER iterations, OMP_NUM_THREADS=$OMP_NUM_THREADS, --call-graph dwarf,${PERF_STACK:-8192}, $samples samples"
printf '  %-52s %9s %10s\n' "command" "seconds" "peak MiB"
awk -F'\t' '{printf "  %-52s %9.2f %10.1f\n", $1, $2, $3}' times.tsv
dl=$(awk -F'\t' 'NR==1 {print $2}' times.tsv)
ps=$(awk -F'\t' '$1=="perf script" {print $2}' times.tsv)
awk -v a="$dl" -v b="$ps" 'BEGIN {printf "  time of perf script alone / time of dlflame report --svg: %.2f\n", b / a}'
echo "file sizes: perf.data $(du -k perf.data | cut -f1) KiB (FlameGraph needs perf script's $(du -k script.txt | cut -f1) KiB text), dlflame.data $(du -k dlflame.data | cut -f1) KiB"
