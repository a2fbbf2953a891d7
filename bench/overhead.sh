#!/usr/bin/env bash
# Trainer throughput (examples/mlp samples/s) unprofiled, under `dlflame record`
# (defaults) and under `perf record` (FP and DWARF, at dlflame's 999 Hz), run
# alternately in one run so that machine noise hits every mode alike. Prints,
# per mode, the median samples/s, its share of the unprofiled median, the
# median of the per-round shares (each run against the unprofiled run of its
# own round, which cancels slow drifts of the machine), the share of medians
# over the runs this VM did not make in its half-speed state, and every run.
#
# The half-speed state: now and then, for seconds to minutes, this 2-vCPU VM
# runs the 2-thread MLP at half its speed, profiled or not (the unprofiled
# runs fall into it as often as the others). Runs under 65% of the fastest
# unprofiled run are taken to be in it; how many were is printed.
#
#   bench/overhead.sh                  # 1 OpenMP thread, 9 rounds
#   OMP_NUM_THREADS=2 ROUNDS=11 bench/overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-9}
ITER=${ITER:-1500}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DL=build/cmd/dlflame
MLP=build/examples/mlp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rate() { sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' | tail -1; }

declare -A runs
modes=(unprofiled dlflame perf-fp perf-dwarf)
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${modes[@]}"; do
    case $m in
      unprofiled) v=$($MLP "$ITER" | rate) ;;
      dlflame) v=$($DL record -o "$tmp/d.data" -- $MLP "$ITER" 2>/dev/null | rate) ;;
      perf-fp) v=$(perf record -q -g -F 999 -o "$tmp/p.data" -- $MLP "$ITER" 2>/dev/null | rate) ;;
      perf-dwarf) v=$(perf record -q --call-graph dwarf -F 999 -o "$tmp/p.data" -- $MLP "$ITER" 2>/dev/null | rate) ;;
    esac
    runs[$m]="${runs[$m]:-} ${v:-0}"
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
column() { echo "$1" | tr ' ' '\n' | grep .; }
base=$(echo "${runs[unprofiled]}" | median)
floor=$(column "${runs[unprofiled]}" | sort -g | tail -1 | awk '{print 0.65 * $1}')
fast() { column "$1" | awk -v f="$floor" '$1 >= f'; }
fbase=$(fast "${runs[unprofiled]}" | median)
echo "mlp $ITER iterations, OMP_NUM_THREADS=$OMP_NUM_THREADS, $ROUNDS rounds"
printf '  %-11s %9s %7s %7s %13s   %s\n' mode "median/s" "share" "paired" "not half-speed" \
  "every run (samples/s)"
for m in "${modes[@]}"; do
  med=$(echo "${runs[$m]}" | median)
  paired=$(paste <(column "${runs[unprofiled]}") <(column "${runs[$m]}") |
    awk '$1 > 0 {print $2 / $1}' | median)
  fmed=$(fast "${runs[$m]}" | median)
  nslow=$(($(column "${runs[$m]}" | wc -l) - $(fast "${runs[$m]}" | wc -l)))
  awk -v m="$m" -v v="$med" -v b="$base" -v p="$paired" -v fm="${fmed:-0}" -v fb="$fbase" \
    -v ns="$nslow" -v all="${runs[$m]}" \
    'BEGIN {printf "  %-11s %9.0f %6.1f%% %6.1f%% %6.1f%% (-%d)  %s\n", m, v, 100 * v / b, 100 * p,
            100 * fm / fb, ns, all}'
done
