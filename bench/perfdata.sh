#!/usr/bin/env bash
# From a DWARF perf.data to a flame graph: dlflame vs perf script (+ FlameGraph when
# FLAMEGRAPH_DIR points at a checkout) vs perf report, on the same file in one run;
# plus file sizes of perf.data and dlflame.data for the same workload. Then the same
# for Debian's PyTorch trainer (examples/cnn_train.py, python3-torch), recorded by
# perf at its defaults with --call-graph dwarf, and once more with perf record -z.
#
#   bench/perfdata.sh                       # mlp, 1500 iterations; cnn_train.py 40 steps
#   ITER=3000 FLAMEGRAPH_DIR=~/FlameGraph bench/perfdata.sh
#   ITER=6000 OMP_NUM_THREADS=2 PERF_STACK=32768 bench/perfdata.sh   # a ~600 MB perf.data
#   STEPS=0 bench/perfdata.sh               # the mlp only
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${ITER:-1500}
STEPS=${STEPS:-40}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DL=$(pwd)/build/cmd/dlflame
MLP=$(pwd)/build/examples/mlp
PY=/usr/bin/python3
CNN=$(pwd)/examples/cnn_train.py
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

# times.tsv as a table, and perf script's time over dlflame report --svg's (its first row)
table() {
  printf '  %-52s %9s %10s\n' "command" "seconds" "peak MiB"
  awk -F'\t' '{printf "  %-52s %9.2f %10.1f%s\n", $1, $2, $3, $4 == 0 ? "" : "  (exit " $4 ")"}' "$1"
  dl=$(awk -F'\t' 'NR==1 {print $2}' "$1")
  ps=$(awk -F'\t' '$1=="perf script" {print $2}' "$1")
  awk -v a="$dl" -v b="$ps" 'BEGIN {printf "  time of perf script alone / time of dlflame report --svg: %.2f\n", b / a}'
}

echo "perf.data of mlp $ITER iterations, OMP_NUM_THREADS=$OMP_NUM_THREADS, --call-graph dwarf,${PERF_STACK:-8192}, $samples samples"
table times.tsv
echo "file sizes: perf.data $(du -k perf.data | cut -f1) KiB (FlameGraph needs perf script's $(du -k script.txt | cut -f1) KiB text), dlflame.data $(du -k dlflame.data | cut -f1) KiB"

[ "$STEPS" -gt 0 ] || exit 0
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "cnn_train.py: python3-torch is not installed (scripts/setup.sh installs it); skipped"
  exit 0
fi
# perf's defaults (4000 Hz, 8 KiB copies); one thread, as the Python-frame figures
for z in "" "-z"; do
  f=torch$z.data
  perf record -q $z --call-graph dwarf -o "$f" -- "$PY" "$CNN" "$STEPS" --threads 1 >/dev/null 2>&1
  samples=$(perf script -i "$f" -F tid -G 2>/dev/null | wc -l)
  {
    $M "dlflame report -i $f --svg" -- "$DL" report -i "$f" --svg -o t.svg
    $M "dlflame report -i $f --folded" -- "$DL" report -i "$f" --folded -o t.folded
    $M "perf script" -- sh -c "perf script -i '$f' > tscript.txt 2>/dev/null"
    $M "perf report --stdio" -- sh -c "perf report -i '$f' --stdio > treport.txt 2>/dev/null"
  } > "times$z.tsv"
  echo
  echo "perf.data of cnn_train.py $STEPS steps --threads 1, perf record $z --call-graph dwarf (8 KiB copies, 4000 Hz), $samples samples, $(du -k "$f" | cut -f1) KiB"
  table "times$z.tsv"
  rm -f tscript.txt treport.txt
done
