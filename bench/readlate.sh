#!/usr/bin/env bash
# How late Python frames read after the sample (--python-frames=read) are
# read, and how many had moved on by then, beside a busy neighbour: the
# split fixture (tests/fixtures/py/split.py, calls of milliseconds) recorded
# with one CPU-bound `yes` running on the side, rounds alternating between
# two builds (BASE, then this one), as the recorder's "Python frames in"
# line says: the share changed before read, the mean and the latest delay.
#
#   BASE=/tmp/wt-old/build-old bench/readlate.sh      # 7 rounds of 4 s each
#   ROUNDS=11 SECONDS_EACH=6 BASE=... bench/readlate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
SECONDS_EACH=${SECONDS_EACH:-4}
BUILD=$(realpath "${BUILD:-build}")
BASE=${BASE:?BASE=the build dir to compare with (e.g. a worktree of an older commit)}
BASE=$(realpath "$BASE")
PY=${PY:-/usr/bin/python3}
tmp=$(mktemp -d)
yes >/dev/null &
busy=$!
trap 'kill $busy 2>/dev/null; rm -rf "$tmp"' EXIT

# one BUILD -> "changed_pct mean_ms max_ms"
one() {
  "$1/cmd/dlflame" record --python-frames=read -o "$tmp/d.data" -- \
    "$PY" tests/fixtures/py/split.py "$SECONDS_EACH" 2>"$tmp/err" >/dev/null
  sed -n 's/.*changed before read \([0-9.]*\)%.*read \([0-9.]*\) ms after the sample on average (at most \([0-9.]*\) ms).*/\1 \2 \3/p' \
    "$tmp/err"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for ((i = 1; i <= ROUNDS; i++)); do
  echo "base $(one "$BASE")" >>"$tmp/all"
  echo "this $(one "$BUILD")" >>"$tmp/all"
done
printf '%-5s %8s %8s %8s   (medians of %d rounds: changed before read %%, mean and latest delay ms)\n' \
  build changed mean latest "$ROUNDS"
for b in base this; do
  printf '%-5s %8s %8s %8s\n' "$b" \
    "$(awk -v b=$b '$1 == b {print $2}' "$tmp/all" | median)" \
    "$(awk -v b=$b '$1 == b {print $3}' "$tmp/all" | median)" \
    "$(awk -v b=$b '$1 == b {print $4}' "$tmp/all" | median)"
done
