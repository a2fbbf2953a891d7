#!/usr/bin/env python3
"""Sum meson test logs into one line any CI can read:
'tests: N passed, N failed, N skipped'. A Criterion binary counts its own
tests (its 'Synthesis:' line); any other test counts as one. A binary that
failed after all its tests passed (a sanitizer report at exit) counts as one
failure.

    scripts/count-tests.py [--prefix TEXT] testlog.json...   # prints the line
    scripts/count-tests.py --counts testlog.json...          # prints 'OK BAD SKIP'
"""
import json
import sys


def count(paths):
    ok = bad = skip = 0
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            for l in (r.get('stdout', '') + '\n' + (r.get('stderr') or '')).splitlines():
                if 'Synthesis: Tested:' in l:
                    f = {k.strip(): int(v) for k, v in
                         (p.split(':') for p in l.split('Synthesis:')[1].split('|'))}
                    ok += f.get('Passing', 0)
                    failed = f.get('Failing', 0) + f.get('Crashing', 0)
                    bad += failed
                    skip += f.get('Skipped', 0)
                    if r['result'] not in ('OK', 'EXPECTEDFAIL', 'SKIP') and not failed:
                        bad += 1
                    break
            else:
                if r['result'] in ('OK', 'EXPECTEDFAIL'):
                    ok += 1
                elif r['result'] == 'SKIP':
                    skip += 1
                else:
                    bad += 1
    return ok, bad, skip


def main():
    args = sys.argv[1:]
    prefix, counts = '', False
    if args[:1] == ['--prefix']:
        prefix, args = args[1], args[2:]
    elif args[:1] == ['--counts']:
        counts, args = True, args[1:]
    ok, bad, skip = count(args)
    print("%d %d %d" % (ok, bad, skip) if counts else
          "%stests: %d passed, %d failed, %d skipped" % (prefix, ok, bad, skip))


if __name__ == '__main__':
    main()
