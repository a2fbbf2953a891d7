#!/usr/bin/env bash
# Fresh machine to test results: install, build, run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
status=0
meson test -C build --print-errorlogs --num-processes 1 || status=$?
# One closing line that any CI can read: N passed, N failed.
python3 - build/meson-logs/testlog.json <<'PY' || true
import json, sys
ok = bad = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    for l in (r.get('stdout', '') + '\n' + (r.get('stderr') or '')).splitlines():
        if 'Synthesis: Tested:' in l:
            f = {k.strip(): int(v) for k, v in
                 (p.split(':') for p in l.split('Synthesis:')[1].split('|'))}
            ok += f.get('Passing', 0)
            bad += f.get('Failing', 0) + f.get('Crashing', 0)
            skip += f.get('Skipped', 0)
            break
    else:
        if r['result'] in ('OK', 'EXPECTEDFAIL'):
            ok += 1
        elif r['result'] == 'SKIP':
            skip += 1
        else:
            bad += 1
print("tests: %d passed, %d failed, %d skipped" % (ok, bad, skip))
PY
exit $status
