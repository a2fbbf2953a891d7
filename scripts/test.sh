#!/usr/bin/env bash
# Fresh machine to test results: install, build, run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
status=0
meson test -C build --print-errorlogs --num-processes 1 || status=$?
# One closing line that any CI can read: N passed, N failed.
scripts/count-tests.py build/meson-logs/testlog.json || true
exit $status
