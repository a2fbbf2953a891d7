#!/usr/bin/env bash
# Fresh machine to test results: install, build, run every test suite (or
# the meson tests named: scripts/test.sh python runs the unit and e2e tests
# named python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
status=0
meson test -C build --print-errorlogs --num-processes 1 "$@" || status=$?
# One closing line that any CI can read: N passed, N failed.
scripts/count-tests.py build/meson-logs/testlog.json || true
exit $status
