#!/usr/bin/env bash
# Fuzz the readers of untrusted input: each libFuzzer target of tests/fuzz
# for $BUDGET seconds (default 20), built with clang into ./build-fuzz
# (ASan + UBSan, every UBSan finding fatal). Starts from the committed
# corpus (tests/fuzz/corpus/TARGET, never written) plus what earlier runs
# found (build-fuzz/corpus/TARGET). Prints one line per target and exits
# non-zero when any target crashed, leaked, timed out or ran out of memory;
# the input is then in build-fuzz/artifacts/.
#   scripts/fuzz.sh [TARGET...]        BUDGET=300 scripts/fuzz.sh unwind
# Needs clang (Debian: apt-get install clang; installed here when missing).
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:-20}
all=(profile report perfdata decode perfmap kallsyms elf unwind)
targets=("${@:-${all[@]}}")

# Per-target limits. max_len keeps an iteration fast; rss and timeout are
# above what the known bounded-but-large cases need (profile/file.c allows a
# payload up to 1100x its compressed size, folded/pprof output of deep stacks).
flags_of() {
  case "$1" in
    profile) echo "-max_len=65536 -rss_limit_mb=2048 -timeout=10" ;;
    report) echo "-max_len=16384 -rss_limit_mb=2048 -timeout=10" ;;
    perfdata) echo "-max_len=65536 -rss_limit_mb=2048 -timeout=10" ;;
    decode) echo "-max_len=8192 -rss_limit_mb=1024 -timeout=10" ;;
    perfmap | kallsyms) echo "-max_len=16384 -rss_limit_mb=1024 -timeout=10" ;;
    elf) echo "-max_len=32768 -rss_limit_mb=2048 -timeout=10" ;;
    unwind) echo "-max_len=16384 -rss_limit_mb=1024 -timeout=10" ;;
    *) return 1 ;;
  esac
}

if ! command -v clang >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "fuzz: installing clang" >&2
  $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang >/dev/null ||
    { echo "fuzz: clang is needed (apt-get install clang)" >&2; exit 1; }
fi
if [ ! -d build-fuzz ]; then
  CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=all' >/dev/null || exit 1
fi
names=()
for t in "${targets[@]}"; do
  flags_of "$t" >/dev/null || { echo "fuzz: no target '$t' (${all[*]})" >&2; exit 2; }
  names+=("tests/fuzz/fuzz-$t")
done
nice -n 19 ninja -C build-fuzz "${names[@]}" >build-fuzz/fuzz-build.log 2>&1 ||
  { cat build-fuzz/fuzz-build.log; echo "fuzz: build failed" >&2; exit 1; }

# leaks inside libraries that dlflame cannot free (elfutils): see the file
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp"
status=0
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/fuzz-$t.log"
  # libdw has no frame pointers: only the slow unwinder sees which of its
  # functions allocated, which lsan.supp's dwarf_getscopes entry needs
  asan=""
  [ "$t" = elf ] && asan=fast_unwind_on_malloc=0
  # shellcheck disable=SC2046 # flags_of prints separate words
  ASAN_OPTIONS=$asan nice -n 19 "build-fuzz/tests/fuzz/fuzz-$t" $(flags_of "$t") -max_total_time="$BUDGET" \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $t: ok, ${runs:-0} runs in ${BUDGET}s, coverage ${cov:-?}"
  else
    status=1
    what=$(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" || echo "exit $rc")
    art=$(grep -o 'build-fuzz/artifacts/[^ ]*' "$log" | tail -1)
    echo "fuzz: $t: FAILED after ${runs:-?} runs: $what; input ${art:-none}; log $log"
  fi
done
exit $status
