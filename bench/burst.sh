#!/usr/bin/env bash
# Records lost in a burst of context switches: the switchstorm fixture
# (tests/fixtures/switchstorm.c: two threads handing a byte back and forth
# under 20 KiB of stack, each hand-over a context-switch sample with its
# stack copy) recorded at the default settings, rounds alternating between
# two builds (BASE, then this one), a fresh recorder each run, as its
# summary line says. Prints each run's lost records, then per build and
# burst size how many runs lost any and the median lost. SPIN is the busy
# loop between hand-overs (100000: some 8,000 a second unprofiled here).
#
#   BASE=/tmp/wt-old/build bench/burst.sh    # 8 rounds of 3000 and of 6000 hand-overs
#   ROUNDS=10 SIZES=3000 SPIN=40000 BASE=... bench/burst.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-8}
SIZES=${SIZES:-3000 6000}
DEPTH=${DEPTH:-20}
SPIN=${SPIN:-100000}
BUILD=$(realpath "${BUILD:-build}")
BASE=${BASE:?BASE=the build dir to compare with (e.g. a worktree of an older commit)}
BASE=$(realpath "$BASE")
STORM=$BUILD/tests/fixtures/switchstorm
[ -x "$STORM" ] || { echo "burst.sh: no $STORM: build this tree first (ninja -C build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one BUILD SIZE -> lost records
one() {
  "$1/cmd/dlflame" record -o "$tmp/d.data" -- "$STORM" "$2" "$DEPTH" 500 "$SPIN" 2>"$tmp/err" >/dev/null
  sed -n 's/^dlflame: [0-9.]* s, [0-9]* samples, [0-9.]* s blocked, \([0-9]*\) lost.*/\1/p' "$tmp/err"
}

for size in $SIZES; do
  for r in $(seq 1 "$ROUNDS"); do
    for b in base this; do
      dir=$BASE; [ $b = this ] && dir=$BUILD
      lost=$(one "$dir" "$size")
      echo "$size $b $lost" >>"$tmp/all"
      echo "hand-overs $size, round $r, $b: ${lost:-?} lost"
    done
  done
done
echo
echo "hand-overs  build  runs that lost any  median lost"
for size in $SIZES; do
  for b in base this; do
    awk -v s="$size" -v b="$b" '$1 == s && $2 == b { print $3 }' "$tmp/all" | sort -n |
      awk -v s="$size" -v b="$b" '{ v[n++] = $1; any += ($1 > 0) }
        END { m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
              printf "%-11s %-6s %d of %-15d %s\n", s, b, any, n, m }'
  done
done
