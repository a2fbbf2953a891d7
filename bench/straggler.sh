#!/usr/bin/env bash
# Does `report --ranks` name the straggler run after run? The two-rank gloo
# DistributedDataParallel job (examples/ddp_train.py STEPS, one process per
# rank as torchrun starts them) recorded RUNS times with a straggler
# (--slow-rank 1: rank 1 does extra work before every step, so rank 0 waits
# for it in every all-reduce) and RUNS times without one, each both ways:
# `dlflame record` at defaults (as root: gloo's collectives probed, the
# straggler judged from each collective's hand-over times) and
# `dlflame record --no-probe-collectives` (judged from sampled blocked time,
# start-up apart). Prints each run's verdict, then
# per way how often it was right: "rank 1" for the straggler job, "none"
# for the other.
#
# MPI=1: the same job on PyTorch's MPI process group, started by
# `mpirun -np 2` (a PyTorch built with MPI: Debian 13's and unstable's; openmpi-bin).
#
#   bench/straggler.sh                  # RUNS=10, STEPS=60
#   RUNS=3 STEPS=30 bench/straggler.sh
#   MPI=1 BUILD=build-sid bench/straggler.sh   # in an unstable root
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
STEPS=${STEPS:-60}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$DL" ] || { echo "straggler: no $DL: build first (meson setup build && ninja -C build)" >&2; exit 1; }
"$PY" -c 'import torch.distributed' 2>/dev/null ||
  { echo "straggler: $PY cannot import torch.distributed (Debian: python3-torch)" >&2; exit 1; }
launch=("$PY" examples/ddp_train.py "$STEPS")
if [ "${MPI:-0}" = 1 ]; then
  "$PY" -c 'import sys, torch.distributed as d; sys.exit(not d.is_mpi_available())' ||
    { echo "straggler: MPI=1, but this PyTorch has no MPI process group (Debian 13's and unstable's have)" >&2; exit 1; }
  command -v mpirun >/dev/null || { echo "straggler: MPI=1 needs mpirun (Debian: openmpi-bin)" >&2; exit 1; }
  launch=(mpirun --allow-run-as-root --oversubscribe -np 2 "${launch[@]}" --backend mpi)
fi

declare -A right total
for way in defaults sampled; do
  for job in straggler none; do right[$way.$job]=0; total[$way.$job]=0; done
done

for ((i = 1; i <= RUNS; i++)); do
  for job in straggler none; do
    for way in defaults sampled; do
      opts=() slow=()
      [ "$way" = sampled ] && opts=(--no-probe-collectives)
      [ "$job" = straggler ] && slow=(--slow-rank 1)
      data=$tmp/$way-$job.data
      if ! "$DL" record --forward-exit "${opts[@]}" -o "$data" -- \
          "${launch[@]}" "${slow[@]}" >"$tmp/log" 2>&1; then
        echo "run $i $job $way: the recording failed:" >&2
        tail -3 "$tmp/log" >&2
        exit 1
      fi
      verdict=$("$DL" report -i "$data" --ranks 2>/dev/null | grep '^straggler: ' | tail -1)
      case $verdict in
        "straggler: rank 1:"*) got="rank 1" ;;
        "straggler: none:"*) got=none ;;
        "straggler: rank "*) got="rank ${verdict#straggler: rank }"; got=${got%%:*} ;;
        *) got="?" ;;
      esac
      want="rank 1"; [ "$job" = none ] && want=none
      total[$way.$job]=$((total[$way.$job] + 1))
      [ "$got" = "$want" ] && right[$way.$job]=$((right[$way.$job] + 1))
      printf 'run %2d  %-9s  %-8s  %s\n' "$i" "$job" "$way" "$verdict"
    done
  done
done
echo
for way in defaults sampled; do
  printf '%-8s  straggler job: rank 1 named %d of %d;  no-straggler job: none %d of %d\n' \
    "$way" "${right[$way.straggler]}" "${total[$way.straggler]}" \
    "${right[$way.none]}" "${total[$way.none]}"
done
