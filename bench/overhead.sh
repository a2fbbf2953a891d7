#!/usr/bin/env bash
# What recording costs a trainer: its throughput unprofiled, under `dlflame
# record` (defaults), under `perf record --call-graph dwarf -F 999` and under
# `perf record -g -F 999` (frame pointers: no stack copy; the least a
# sampler at that rate can cost on this machine), run alternately round after
# round so that machine noise hits every mode alike; and what dlflame spends
# of its own while it records, thread by thread.
#
# Trainers (TRAINERS, each NAME:THREADS): cnn is examples/cnn_train.py
# (python3-torch; THREADS intra-op threads, its images/s line), mlp is
# examples/mlp (oneDNN; THREADS OpenMP threads, its samples/s line). Both
# time their training loop only, not their start.
#
# Printed per trainer and mode: the median rate, its share of the unprofiled
# median, the median of the per-round shares (each run against the
# unprofiled run of its own round, which cancels slow drifts of the machine:
# the figure to quote), the share of medians over the runs not made in the
# VM's half-speed state, and every run. The half-speed state: now and then,
# for seconds to minutes, a 2-vCPU VM runs a 2-thread trainer at half its
# speed, profiled or not; runs under 65% of the fastest unprofiled run are
# taken to be in it, and how many were is printed.
#
# Then dlflame's own cost (bench/threadcost.py reads /proc/PID/task/*/stat
# and status of the recorder, not of the trainer): per thread name, the
# median over the rounds of its user and system CPU in ms, that CPU as a
# share of one CPU over the run, and its wakeups per second (voluntary +
# involuntary context switches over the run's wall time); then all its
# threads' CPU over the run, and over the span the trainer ran only (what
# the trainer competes with; the recorder's start, and its naming and
# writing after the trainer's exit, apart).
#
# The CNN's speed depends on how glibc's malloc serves PyTorch's large
# tensors: from the heap, reused, or each from a fresh mmap whose pages all
# fault in. glibc moves its mmap threshold as chunks are freed, and where it
# settles differs from run to run of the same command: the CNN at one thread
# ran with 340,000-860,000 page faults and 1,000-1,630 images/s, profiled or
# not, and the fault count, not the profiler, set most of a run's speed. So
# every mode runs with the same fixed threshold (MALLOC, glibc tunables;
# default: 32 MiB, trim at 64 MiB, about 42,000 faults a run, what a caching
# allocator gives); MALLOC=131072 is glibc's static default (every large
# tensor an mmap: 1.9 million faults, the most page-fault samples), MALLOC=
# leaves glibc to move it.
#
# The loops are long enough (CNN_STEPS=300, MLP_ITER=6000: 7-13 s) for the
# trainer's steady state to set the rate. The recorder's start (the first
# reads of each library's unwind tables and symbols, as the first samples in
# it arrive) lands in the loop's first second; over the MLP's former 1.7 s
# loop it took 6.8% of a CPU, over 6.6 s 3.9-5.0% (session 23). What a run of
# hours pays is the latter. Shorter loops: CNN_STEPS=150 MLP_ITER=1500.
#
# On a machine shared with other work every figure is noisy: use more rounds
# on a quiet one.
#
#   bench/overhead.sh                              # cnn:1 cnn:2 mlp:1 mlp:2, 5 rounds
#   ROUNDS=11 TRAINERS="cnn:2" bench/overhead.sh
#   MODES="unprofiled dlflame perf-fp perf-dwarf" TRAINERS=mlp:1 ROUNDS=15 bench/overhead.sh
#   BUILD=build-trixie bench/overhead.sh           # in a Debian 13 root (enter.sh)
#   BASE=/tmp/build-old MODES="unprofiled dlflame-base dlflame" bench/overhead.sh   # before/after
#   MODES="unprofiled dlflame dlflame-read perf-dwarf" TRAINERS="cnn:1 cnn:2" bench/overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
TRAINERS=${TRAINERS:-cnn:1 cnn:2 mlp:1 mlp:2}
MODES=${MODES:-unprofiled dlflame perf-dwarf perf-fp}
MALLOC=${MALLOC-33554432}
# the trainer's only, not the recorder's
tunables=
[ -n "$MALLOC" ] && tunables="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=$MALLOC:glibc.malloc.trim_threshold=$((2 * MALLOC))"
CNN_STEPS=${CNN_STEPS:-300}
MLP_ITER=${MLP_ITER:-6000}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
MLP=$BUILD/examples/mlp
CNN=$PWD/examples/cnn_train.py
TC=$PWD/bench/threadcost.py
PERF=${PERF:-perf}
# MODES may hold dlflame-base: `dlflame record` of another build (BASE), to compare two in one session,
# dlflame-bpf: `dlflame record --python-frames=bpf` (Python frames copied at the sample: what the
# default does as root), dlflame-read: `--python-frames=read` (read just after each sample) and
# dlflame-8k: `-g dwarf,8192` (perf's own stack copy, a quarter of dlflame's default: what the
# copy's size costs the trainer), dlflame-no-offcpu, dlflame-no-faults, dlflame-no-python (`--no-X`:
# what each kind of record costs the trainer) and dlflame-nojit (oneDNN's JIT kernels left unnamed:
# what writing their perf map costs)
BASE_DL=$(realpath "${BASE:-build}")/cmd/dlflame
tmp=$(mktemp -d)
# the kernel counts the BPF program's runs and time while bpf_stats_enabled is 1 (root): the time
# it takes on the trainer's CPUs at each sample, which no thread of dlflame's shows
stats=/proc/sys/kernel/bpf_stats_enabled
stats_was=$(cat "$stats" 2>/dev/null || true)
[ -w "$stats" ] && echo 1 > "$stats"
trap 'rm -rf "$tmp"; [ -n "$stats_was" ] && [ -w "$stats" ] && echo "$stats_was" > "$stats"' EXIT

for t in $TRAINERS; do
  case ${t%%:*} in
    cnn) python3 -c 'import torch' 2>/dev/null ||
      { echo "overhead.sh: python3-torch is not installed (scripts/setup.sh installs it)" >&2; exit 1; } ;;
    mlp) [ -x "$MLP" ] || { echo "overhead.sh: no $MLP: build first (ninja -C ${BUILD#$PWD/})" >&2; exit 1; } ;;
    *) echo "overhead.sh: unknown trainer '$t' (cnn:N or mlp:N)" >&2; exit 2 ;;
  esac
done
[ -x "$DL" ] || { echo "overhead.sh: no $DL: build first" >&2; exit 1; }

# the trainer's command line and the sed that reads its rate
trainer() {
  case ${1%%:*} in
    cnn) echo "env $tunables python3 $CNN $CNN_STEPS --threads ${1#*:}" ;;
    mlp) echo "env $tunables OMP_NUM_THREADS=${1#*:} $MLP $MLP_ITER" ;;
  esac
}
rate() { sed -n 's/.* \([0-9.]*\) \(images\|samples\)\/s.*/\1/p' | tail -1; }

declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
  for t in $TRAINERS; do
    cmd=$(trainer "$t")
    for m in $MODES; do
      case $m in
        unprofiled) v=$($cmd 2>/dev/null | rate) ;;
        dlflame | dlflame-base | dlflame-bpf | dlflame-read | dlflame-8k | dlflame-no-* | dlflame-nojit)
          dl=$DL opt= env=
          [ "$m" = dlflame-base ] && dl=$BASE_DL
          [ "$m" = dlflame-bpf ] && opt=--python-frames=bpf
          [ "$m" = dlflame-read ] && opt=--python-frames=read
          [ "$m" = dlflame-8k ] && opt="-g dwarf,8192"
          case $m in dlflame-no-*) opt=--${m#dlflame-} ;; esac
          [ "$m" = dlflame-nojit ] && env="ONEDNN_JIT_PROFILE=0 DNNL_JIT_PROFILE=0"
          v=$(env $env python3 "$TC" "$tmp/cost" -- $dl record $opt -o "$tmp/d.data" -- $cmd 2>"$tmp/err" | rate)
          # one line per round: name user sys vcs nvcs threads, wall_s last
          awk -v r="$r" '{print r "\t" $0}' "$tmp/cost" >> "$tmp/cost.$t.$m"
          # the records it lost, the share of stacks complete and of eval calls with Python frames
          echo "$(sed -n 's/.*, \([0-9]*\) lost,.*/\1/p' "$tmp/err" | tail -1)" \
            "$(sed -n 's/.* \([0-9.]*\)% of stacks complete.*/stacks \1% complete,/p' "$tmp/err" | tail -1)" \
            "$(sed -n 's/.*Python frames in \([0-9.]*\)% of.*/\1%/p' "$tmp/err" | tail -1)" \
            "$(sed -n 's/.*read \([0-9.]*\) ms after the sample on average.*/(read after \1 ms)/p' "$tmp/err" | tail -1)" \
            "$(sed -n 's/.*BPF program that copies Python frames ran \([0-9]*\) times, \([0-9.]*\) us each, \([0-9.]*\) s in all.*/(BPF: \1 runs, \2 us each, \3 s)/p' "$tmp/err" | tail -1)" >> "$tmp/lost.$t.$m" ;;
        perf-fp) v=$($PERF record -q -g -F 999 -o "$tmp/p.data" -- $cmd 2>/dev/null | rate) ;;
        perf-dwarf) v=$($PERF record -q --call-graph dwarf -F 999 -o "$tmp/p.data" -- $cmd 2>/dev/null | rate) ;;
        *) echo "overhead.sh: unknown mode '$m'" >&2; exit 2 ;;
      esac
      runs[$t.$m]="${runs[$t.$m]:-} ${v:-0}"
      echo "overhead.sh: round $r, $t, $m: ${v:-no rate}" >&2
    done
  done
done

median() { tr ' ' '\n' | { grep . || true; } | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
column() { echo "$1" | tr ' ' '\n' | { grep . || true; }; }
echo "$(uname -r), $(nproc) CPUs, $(python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch'), $ROUNDS rounds, malloc's mmap threshold ${MALLOC:-moved by glibc}, rate = the trainer's own (loop only)"
for t in $TRAINERS; do
  echo "$t ($(trainer "$t" | sed "s|$PWD/||g; s|$BUILD/|build/|"))"
  base=$(echo "${runs[$t.unprofiled]:-}" | median)
  if [ -n "${runs[$t.unprofiled]:-}" ]; then
  floor=$(column "${runs[$t.unprofiled]}" | sort -g | tail -1 | awk '{print 0.65 * $1}')
  fast() { column "$1" | awk -v f="$floor" '$1 >= f'; }
  fbase=$(fast "${runs[$t.unprofiled]}" | median)
  printf '  %-11s %9s %7s %7s %13s   %s\n' mode "median/s" "share" "paired" "not half-speed" "every run"
  for m in $MODES; do
    med=$(echo "${runs[$t.$m]}" | median)
    paired=$(paste <(column "${runs[$t.unprofiled]}") <(column "${runs[$t.$m]}") |
      awk '$1 > 0 {print $2 / $1}' | median)
    fmed=$(fast "${runs[$t.$m]}" | median)
    nslow=$(($(column "${runs[$t.$m]}" | wc -l) - $(fast "${runs[$t.$m]}" | wc -l)))
    awk -v m="$m" -v v="$med" -v b="$base" -v p="$paired" -v fm="${fmed:-0}" -v fb="$fbase" \
      -v ns="$nslow" -v all="${runs[$t.$m]}" \
      'BEGIN {printf "  %-11s %9.1f %6.1f%% %6.1f%% %6.1f%% (-%d)  %s\n", m, v, 100 * v / b, 100 * p,
              100 * fm / fb, ns, all}'
  done
  else
    echo "  (no unprofiled runs: no shares)"
  fi
  for m in $MODES; do
    [ -s "$tmp/cost.$t.$m" ] || continue
    echo "  $m's threads, median of $ROUNDS rounds: user ms, system ms, % of one CPU over the run, wakeups/s"
    # per round: the wall time, then each thread name's figures
    awk -F'\t' '
      $2 == "wall_s" { wall[$1] = $3; next }
      $2 == "child_s" { cw[$1] = $3; next }
      $2 == "child_cpu_ms" { cc[$1] = $3; next }
      { key[$2] = 1; u[$2, $1] = $3; s[$2, $1] = $4; cs[$2, $1] = $5 + $6; n[$2, $1] = $7
        rounds[$1] = 1 }
      function med(a, k,   i, m, v, x, j, t) {
        m = 0
        for (i in rounds) v[++m] = ((k, i) in a) ? a[k, i] : 0
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      }
      END {
        for (i in rounds) { pct[i] = 0; tot[i] = 0 }
        for (k in key) for (i in rounds) { c = ((k, i) in u) ? u[k, i] + s[k, i] : 0; tot[i] += c
          cpu[k, i] = 100 * c / (1000 * wall[i]); wk[k, i] = ((k, i) in cs) ? cs[k, i] / wall[i] : 0 }
        for (i in rounds) all[i] = 100 * tot[i] / (1000 * wall[i])
        for (k in key) printf "    %-16s %7.0f %7.0f %6.1f%% %8.0f\n", k, med(u, k), med(s, k), med(cpu, k), med(wk, k)
        for (i in rounds) { w[i] = wall[i]; tt[i] = tot[i] }
        printf "    %-16s %15.0f %6.1f%% %8s  (run %.1f s)\n", "all", medv(tt), medv(all), "", medv(w)
        nc = 0
        for (i in cw) if (cw[i] > 0) { cp[i] = 100 * cc[i] / (1000 * cw[i]); nc++ }
        if (nc) printf "    %-16s %15s %6.1f%% %8s  (while the trainer ran, %.1f s: its start and end apart)\n", "all, trainer on", "", medv(cp), "", medv(cw)
      }
      function medv(a,   i, m, v, j, t) {
        m = 0
        for (i in a) v[++m] = a[i]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      }' "$tmp/cost.$t.$m" | sort -k1,1
    echo "  $m's lost records, share of stacks complete, of eval calls with Python frames (read how long after the sample), per round:" \
      "$(tr '\n' ',' < "$tmp/lost.$t.$m" | sed 's/,$//; s/,/, /g')"
  done
done
