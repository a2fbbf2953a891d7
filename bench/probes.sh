#!/usr/bin/env bash
# What a probe costs per call: the calls fixture's loop of N calls of a tiny
# function, each followed by GAP microseconds of work (tests/fixtures/calls.c,
# "many N GAP": 10,000 calls a second by default), timed by itself, unrecorded,
# under `dlflame record --probe quick` and under `perf record` of the same
# entry and return uprobes (perf probe -x FIXTURE quick / quick%return), in
# the same session, alternating; medians. The per-call cost is the extra
# time over N.
#
# Then what page-fault sampling costs the MLP (examples/mlp MLP_ITER
# iterations, OMP_NUM_THREADS=1 unless set), in the same run, alternating:
# unprofiled; dlflame record --no-faults and record (faults on, the default); perf record of
# cpu-clock alone, of cpu-clock and page-faults, and of page-faults alone,
# each at dlflame's frequency (999 Hz at most, the fault event included)
# with stacks as dlflame takes them (--call-graph dwarf,32768). Medians of
# the whole run's wall time (the MLP faults mostly while it loads), of the
# CPU time of the run and all it ran (the recorder's own included: less
# sensitive than wall time to a machine shared with other work), and of
# the training throughput; and the medians of each round against its own
# unprofiled run, which cancel the machine's slow drifts; the fault samples
# each tool took (dlflame: report --faults; perf: perf script).
#
#   bench/probes.sh                     # N = 20000, GAP = 100 us, 5 rounds; MLP 1500
#   N=50000 GAP=20 ROUNDS=3 MLP_ITER=600 MLP_ROUNDS=9 bench/probes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
GAP=${GAP:-100}
ROUNDS=${ROUNDS:-5}
MLP_ITER=${MLP_ITER:-1500}
MLP_ROUNDS=${MLP_ROUNDS:-$ROUNDS}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
FX=$BUILD/tests/fixtures/calls
MLP=$BUILD/examples/mlp
tmp=$(mktemp -d)
cleanup() { perf probe -q -d 'probe_calls:*' 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$FX" ] || { echo "build the fixtures first ($FX)" >&2; exit 1; }
[ -x "$MLP" ] || { echo "build the MLP first ($MLP; it needs libdnnl-dev)" >&2; exit 1; }
perf probe -q -d 'probe_calls:*' 2>/dev/null || true
perf probe -q -x "$FX" quick
perf probe -q -x "$FX" 'quick%return'

secs() { sed -n 's/^calls: [0-9]* calls in \([0-9.]*\) s$/\1/p'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$tmp/none"; : > "$tmp/dlflame"; : > "$tmp/perf"; : > "$tmp/perfd"
for ((r = 1; r <= ROUNDS; r++)); do
  "$FX" many "$N" "$GAP" | secs >> "$tmp/none"
  "$DL" record --no-offcpu --probe quick --probe-stack 32768 -o "$tmp/d.data" -- "$FX" many "$N" "$GAP" 2>"$tmp/err" |
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
  printf "  dlflame --probe (entry + return, 32 KiB stack at entry): %.3f s, %.2f us per call\n", td, (td - t0) / n * 1e6
  printf "  perf record -e probe entry + return (no stack):          %.3f s, %.2f us per call\n", tp, (tp - t0) / n * 1e6
  printf "  perf record --call-graph dwarf,8192 -e the same:         %.3f s, %.2f us per call\n", tq, (tq - t0) / n * 1e6 }'

# ---- page-fault sampling on the MLP ------------------------------------------
rate() { sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' | tail -1; }
# run mode m's command: its wall time, and the CPU time (user + sys) of it and everything it ran
TIMEFORMAT='%R %U %S'
timed() {
  local m=$1 w u s
  shift
  { time "$@" > "$tmp/out" 2> "$tmp/err"; } 2> "$tmp/time"
  read -r w u s < "$tmp/time"
  echo "$w" >> "$tmp/$m.wall"
  awk -v u="$u" -v s="$s" 'BEGIN { print u + s }' >> "$tmp/$m.cpu"
  rate < "$tmp/out" >> "$tmp/$m.rate"
}
modes=(unprofiled dlflame dlflame-faults perf perf-faults perf-faults-only)
pstack=(--call-graph dwarf,32768 -F 999)
for m in "${modes[@]}"; do : > "$tmp/$m.wall"; : > "$tmp/$m.cpu"; : > "$tmp/$m.rate"; : > "$tmp/$m.n"; done
for ((r = 1; r <= MLP_ROUNDS; r++)); do
  for m in "${modes[@]}"; do
    case $m in
      unprofiled) timed $m "$MLP" "$MLP_ITER" ;;
      dlflame) timed $m "$DL" record --no-faults -o "$tmp/d.data" -- "$MLP" "$MLP_ITER" ;;
      dlflame-faults) timed $m "$DL" record -o "$tmp/d.data" -- "$MLP" "$MLP_ITER"
        "$DL" report -i "$tmp/d.data" --faults --folded -o "$tmp/f.folded" 2>&1 |
          sed -n 's/.*wrote .* (\([0-9]*\) samples).*/\1/p' >> "$tmp/$m.n" ;;
      perf) timed $m perf record "${pstack[@]}" -e cpu-clock -o "$tmp/p.data" -- "$MLP" "$MLP_ITER" ;;
      perf-faults) timed $m perf record "${pstack[@]}" -e cpu-clock -e page-faults \
          -o "$tmp/p.data" -- "$MLP" "$MLP_ITER" ;;
      perf-faults-only) timed $m perf record "${pstack[@]}" -e page-faults -o "$tmp/p.data" -- \
          "$MLP" "$MLP_ITER" ;;
    esac
    case $m in
      perf-faults*) perf script -i "$tmp/p.data" -F event 2>/dev/null |
        grep -c 'page-faults' >> "$tmp/$m.n" || true ;;
    esac
  done
done
# each round against its own unprofiled run: a ratio, or a difference
ratio() { paste "$tmp/unprofiled.$2" "$tmp/$1.$2" | awk '$1 > 0 {print $2 / $1}' | median; }
diff_() { paste "$tmp/unprofiled.$2" "$tmp/$1.$2" | awk '{print $2 - $1}' | median; }
echo "mlp $MLP_ITER iterations, OMP_NUM_THREADS=$OMP_NUM_THREADS, $MLP_ROUNDS rounds: medians, and"
echo "medians of each round against its own unprofiled run (paired)"
printf '  %-36s %7s %7s %7s %8s %10s %7s  %s\n' mode "wall s" paired "CPU s" "+CPU s" \
  "samples/s" paired "fault samples"
for m in "${modes[@]}"; do
  case $m in
    unprofiled) what="unprofiled" ;;
    dlflame) what="dlflame record --no-faults" ;;
    dlflame-faults) what="dlflame record (faults on)" ;;
    perf) what="perf record -e cpu-clock" ;;
    perf-faults) what="perf record -e cpu-clock,page-faults" ;;
    perf-faults-only) what="perf record -e page-faults" ;;
  esac
  n=$( [ -s "$tmp/$m.n" ] && median < "$tmp/$m.n" || echo "-")
  awk -v what="$what" -v w="$(median < "$tmp/$m.wall")" -v pw="$(ratio "$m" wall)" \
    -v c="$(median < "$tmp/$m.cpu")" -v dc="$(diff_ "$m" cpu)" -v r="$(median < "$tmp/$m.rate")" \
    -v pr="$(ratio "$m" rate)" -v n="$n" \
    'BEGIN { printf "  %-36s %7.2f %6.1f%% %7.2f %+8.2f %10.0f %6.1f%%  %s\n",
      what, w, 100 * pw, c, dc, r, 100 * pr, n }'
done
echo "  perf: --call-graph dwarf,32768 -F 999 (dlflame's stack copy and frequency). Every run:"
for m in "${modes[@]}"; do
  echo "   $m: wall $(tr '\n' ' ' < "$tmp/$m.wall")/ CPU $(tr '\n' ' ' < "$tmp/$m.cpu")/" \
    "samples/s $(tr '\n' ' ' < "$tmp/$m.rate")"
done
