#!/usr/bin/env bash
# What reading Python frames costs, on Debian's PyTorch CNN trainer
# (examples/cnn_train.py), side by side in the same session:
#   - dlflame's own CPU per sample (`perf stat --no-inherit` on dlflame alone),
#     with --no-python and with Python frames, for a short and a long run
#     (the difference over the difference in samples is the per-sample cost);
#   - the trainer's own throughput (its images/s line) under each;
#   - with Python frames: the share of eval calls shown vs placeholders, and
#     the share of samples with a placeholder: in the whole run (the import
#     of torch included) and in the training loop (samples under main()).
#
#   bench/python.sh                 # 1 torch thread, 30 and 120 steps, 3 rounds
#   THREADS=2 ROUNDS=5 bench/python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-1}
SHORT=${SHORT:-30}
LONG=${LONG:-120}
ROUNDS=${ROUNDS:-3}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
PY=/usr/bin/python3
CNN=$PWD/examples/cnn_train.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -c 'import torch' 2>/dev/null || { echo "python3-torch is not installed" >&2; exit 1; }

# one MODE STEPS -> "cpu_ms samples images_per_s shown_pct placeholder_pct loop_placeholder_pct"
one() {
  local opt=()
  [ "$1" = native ] && opt=(--no-python)
  perf stat --no-inherit -e task-clock -x, -o "$tmp/stat" -- \
    "$DL" record "${opt[@]}" -o "$tmp/d.data" -- "$PY" "$CNN" "$2" --threads "$THREADS" \
    2>"$tmp/err" >"$tmp/out"
  cpu=$(awk -F, '/task-clock/ {print $1}' "$tmp/stat")
  n=$(sed -n 's/^dlflame: [0-9.]* s, \([0-9]*\) samples.*/\1/p' "$tmp/err")
  ips=$(sed -n 's/.*, \([0-9.]*\) images\/s.*/\1/p' "$tmp/out")
  shown=$(sed -n 's/.*Python frames in \([0-9.]*\)% of.*/\1/p' "$tmp/err")
  ph="0 0"
  if [ "$1" = python ]; then
    "$DL" report -i "$tmp/d.data" --folded -o "$tmp/f" 2>/dev/null
    ph=$(awk '{n = $NF; all += n; p = /\[python frames (changed before read|not read)\]/
               bad += p ? n : 0
               if (/main \(cnn_train\.py\)/) { loop += n; lbad += p ? n : 0 } }
             END { printf "%.2f %.2f", 100 * bad / all, 100 * lbad / loop }' "$tmp/f")
  fi
  echo "$cpu $n $ips ${shown:-0} $ph"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for mode in native python; do
  : > "$tmp/$mode.s"; : > "$tmp/$mode.l"
done
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in native python; do
    one $mode "$SHORT" >> "$tmp/$mode.s"
    one $mode "$LONG" >> "$tmp/$mode.l"
  done
done
echo "dlflame record of examples/cnn_train.py ($BUILD), --threads $THREADS, median of $ROUNDS runs each"
for mode in native python; do
  sc=$(cut -d' ' -f1 "$tmp/$mode.s" | median); sn=$(cut -d' ' -f2 "$tmp/$mode.s" | median)
  lc=$(cut -d' ' -f1 "$tmp/$mode.l" | median); ln=$(cut -d' ' -f2 "$tmp/$mode.l" | median)
  ips=$(cut -d' ' -f3 "$tmp/$mode.l" | median); shown=$(cut -d' ' -f4 "$tmp/$mode.l" | median)
  ph=$(cut -d' ' -f5 "$tmp/$mode.l" | median); lph=$(cut -d' ' -f6 "$tmp/$mode.l" | median)
  awk -v m="$mode" -v sc="$sc" -v lc="$lc" -v sn="$sn" -v ln="$ln" -v ips="$ips" -v sh="$shown" \
      -v ph="$ph" -v lph="$lph" 'BEGIN {
    per = (lc - sc) / (ln - sn) * 1000
    printf "  %-7s %6d / %6d samples: dlflame CPU %.1f us per sample; trainer %.1f images/s",
      (m == "native" ? "native" : "python"), sn, ln, per, ips
    if (m == "python")
      printf "; Python frames shown for %.1f%% of eval calls; samples with a placeholder: " \
        "%.1f%% of the run (import of torch included), %.1f%% of its training loop", sh, ph, lph
    printf "\n" }'
done
