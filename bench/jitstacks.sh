#!/usr/bin/env bash
# Are stacks through oneDNN's JIT kernels right, run after run? Debian's
# PyTorch CNN trainer (examples/cnn_train.py) recorded RUNS times at
# defaults; per run:
#   - JIT-leaf samples (the innermost user frame is a JIT kernel, `_[j]`)
#     and the share of them, by weight, that pass through
#     dnnl_primitive_execute (the calling thread) or libgomp's thread start
#     (the OpenMP team's workers, THREADS > 1) in a stack unwound whole
#     (report --complete);
#   - stacks counted complete whose outermost frame is not a thread entry
#     (_start, clone3, clone, ld.so's entry code): must be none.
# Then the worst and the median share over the runs.
#
#   bench/jitstacks.sh                       # RUNS=20, STEPS=30, THREADS=1
#   BUILD=build-trixie bench/jitstacks.sh    # in the Debian 13 root
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
STEPS=${STEPS:-30}
THREADS=${THREADS:-1}
BUILD=$(realpath "${BUILD:-build}")
DL=$BUILD/cmd/dlflame
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$DL" ] || { echo "jitstacks: no $DL: build first" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "jitstacks: $PY cannot import torch (Debian: python3-torch)" >&2; exit 1; }

# jitleaf FOLDED -> "weight weight_through_dnnl"
jitleaf() {
  awk '{ w = $NF; $NF = ""; n = split($0, f, ";"); sub(/ +$/, "", f[n])
         while (n > 1 && f[n] ~ /_\[k\] *$/) { n--; sub(/ +$/, "", f[n]) }
         if (f[n] !~ /_\[j\]$/) next
         all += w
         # the thread that called the primitive, or a worker of its OpenMP team
         # (libgomp has no symbols without its debug package: its frame is libgomp.so.1+0x...)
         if (index($0, ";dnnl_primitive_execute;") || $0 ~ /;start_thread;(gomp_thread_start|libgomp\.so[.0-9]*\+0x[0-9a-f]+);/) through += w }
       END { printf "%d %d\n", all, through }' "$1"
}

LDENTRY=$(( $(readelf -h /lib64/ld-linux-x86-64.so.2 | awk '/Entry point/ { print $4 }') ))
: > "$tmp/shares"
bad_all=0
for ((i = 1; i <= RUNS; i++)); do
  "$DL" record -o "$tmp/d.data" -- "$PY" examples/cnn_train.py "$STEPS" --threads "$THREADS" \
    >"$tmp/out" 2>"$tmp/err" || { echo "run $i: the recording failed:" >&2; tail -3 "$tmp/err" >&2; exit 1; }
  "$DL" report -i "$tmp/d.data" --folded -o "$tmp/all.folded" 2>/dev/null
  "$DL" report -i "$tmp/d.data" --folded --complete -o "$tmp/complete.folded" 2>/dev/null
  read -r all _ < <(jitleaf "$tmp/all.folded")
  read -r _ ok < <(jitleaf "$tmp/complete.folded")
  bad=$(awk -v ldentry="$LDENTRY" '
         { split($0, f, ";"); o = f[2]; sub(/ [0-9]+$/, "", o)
           if (o ~ /^(_start|clone3|__clone3|clone|__clone|_dl_start_user)$/) next
           # the dynamic loader entry code (a process first frame, before libc)
           if (match(o, /ld-linux-x86-64\.so\.2\+0x[0-9a-f]+/)) {
             h = substr(o, RSTART + 23, RLENGTH - 23); a = 0
             for (i = 1; i <= length(h); i++) a = a * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
             if (a >= ldentry && a < ldentry + 64) next
           }
           n += $NF }
         END { print n + 0 }' "$tmp/complete.folded")
  bad_all=$((bad_all + bad))
  # an outermost frame without a name cannot be told to be a thread entry
  if [ "$bad" -gt 0 ] && grep -q '^[^;]*;libc\.so\.6+0x' "$tmp/complete.folded"; then
    echo "jitstacks: libc has no symbols here, so its thread entries (clone3) are not named and count above; install libc6-dbg" >&2
  fi
  share=$(awk -v a="$all" -v o="$ok" 'BEGIN { printf "%.2f", a ? 100 * o / a : 0 }')
  echo "$share" >> "$tmp/shares"
  # the recording's own word on stacks cut at a kernel whose code it could not read
  unread=$(sed -n 's/.*JIT preamble not read \([0-9.]*\)%.*/\1/p' "$tmp/err" | head -1)
  printf 'run %2d: %5d JIT-leaf samples, %6s%% through dnnl_primitive_execute or an OpenMP worker start to a thread entry; %d complete stacks not at a thread entry; JIT preamble not read %s%%\n' \
    "$i" "$all" "$share" "$bad" "${unread:-0}"
done
sort -g "$tmp/shares" | awk -v runs="$RUNS" -v bad="$bad_all" -v t="$THREADS" -v b="$BUILD" \
  '{ a[NR] = $1 } END { printf "%d runs (%s, --threads %s): worst %.2f%%, median %.2f%%; complete stacks not at a thread entry: %d\n", runs, b, t, a[1], (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2), bad }'
