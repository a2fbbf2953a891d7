#!/usr/bin/env bash
# The whole test suite (or the suites named) built with ASan + UBSan (gcc)
# into ./build-asan: any sanitizer report fails the test that hit it. Same
# closing line as scripts/test.sh: 'tests: N passed, N failed, N skipped'.
#   scripts/sanitize.sh [SUITE...]
# Run scripts/setup.sh first (packages, node modules, build/tools/pprof).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -d build-asan ]; then
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || exit 1
fi
nice -n 10 ninja -C build-asan >build-asan/sanitize-build.log 2>&1 ||
  { cat build-asan/sanitize-build.log; echo "sanitize: build failed" >&2; exit 1; }
# abort_on_error: a report is a crash that Criterion and meson both count
asan=halt_on_error=1:abort_on_error=1:detect_leaks=1:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1
# leaks inside libraries (Criterion, elfutils) that dlflame cannot free
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp"
suites=()
for s in "$@"; do suites+=(--suite "$s"); done
# e2e/memory measures that peak RSS stays flat over a longer recording;
# ASan's quarantine of freed memory (256 MB) grows it by design, so that
# test runs on its own with the quarantine off, every other check kept.
# e2e/lost checks that a release build loses no records at the default
# settings: a speed property, which a build 2-3x slower cannot show (it runs
# in the normal suite on every CI run). e2e/ops compares sampled shares with
# torch.profiler's, a measurement a slower recorder disturbs; browser-cnn,
# speedscope-browser and docs record real trainers or drive a browser for
# minutes and run no C code the other suites leave out: all four run in the
# normal suite. e2e/podman judges Python-frame shares too, and runs dlflame
# inside containers, where podman passes none of the sanitizers' options
# (suppressions included); the code it reaches runs here in cli and
# containers, its diagnoses in the sampler and python unit tests.
# e2e/python judges how fresh Python frames are (their shares, the outer
# function on 99.5% of stacks, every probed call's Python caller): a build
# 2-3x slower reads later and misses those marks (99.42%, 93% of calls
# seen), a speed property again; the reader's and the BPF records' code
# runs here in the python and pybpf unit tests, and the Python recordings
# of cli and containers.
mapfile -t names < <(meson test -C build-asan --list "${suites[@]}" 2>/dev/null |
  sed -n 's/^[^:]*:[^/]* \/ //p' | sort -u |
  grep -vx -e memory -e lost -e ops -e browser-cnn -e speedscope-browser -e docs -e podman \
    -e python)
status=0
# ASan makes everything 2-3x slower: three times each test's timeout
ASAN_OPTIONS=$asan nice -n 10 meson test -C build-asan --print-errorlogs --num-processes 1 \
  --timeout-multiplier 3 "${suites[@]}" "${names[@]}" || status=$?
logs=(build-asan/meson-logs/testlog.json)
if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx e2e; then
  ASAN_OPTIONS=$asan:quarantine_size_mb=0:thread_local_quarantine_size_kb=0 nice -n 10 \
    meson test -C build-asan --print-errorlogs --num-processes 1 --timeout-multiplier 3 \
    --logbase testlog-memory memory || status=$?
  logs+=(build-asan/meson-logs/testlog-memory.json)
fi
# the unit tests named python (the reader), which the name left out above
if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx unit; then
  ASAN_OPTIONS=$asan nice -n 10 meson test -C build-asan --print-errorlogs --num-processes 1 \
    --timeout-multiplier 3 --logbase testlog-pyunit --suite unit python || status=$?
  logs+=(build-asan/meson-logs/testlog-pyunit.json)
fi
scripts/count-tests.py --prefix "sanitize: " "${logs[@]}" || true
exit $status
