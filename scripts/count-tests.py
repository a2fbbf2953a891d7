#!/usr/bin/env python3
"""Sum meson test logs into one line any CI can read:
'tests: N passed, N failed, N skipped'. A Criterion binary counts its own
tests (its 'Synthesis:' line, which leaves skipped tests out, plus its
'[SKIP] suite::name: reason' lines: meson runs Criterion at verbosity 1);
any other test counts as one. A binary that failed after all its tests
passed (a sanitizer report at exit) counts as one failure. Each skip is
listed with its reason on stderr before the line, and each failed or
crashed Criterion test with the assertion that failed ('failed: ...'): a
CI log cut to its tail, or meson's own log of a failing test cut to its
last lines, still names them.

    scripts/count-tests.py [--prefix TEXT] testlog.json...   # prints the line
    scripts/count-tests.py --counts testlog.json...          # prints 'OK BAD SKIP'
"""
import json
import sys


def failures(name, text):
    """'failed: binary: suite::test: assertion' lines for each [FAIL] or
    [CRASH] in one Criterion binary's output, with the assertion's lines
    since that test's [RUN ]."""
    out, since = [], []
    for l in text:
        if l.startswith('[RUN ]'):
            since = []
        elif l.startswith('[FAIL] ') or l.startswith('[CRASH] '):
            test = l.split('] ', 1)[1].split(':')[0:3]
            why = []
            for i, s in enumerate(since):
                if 'Assertion Failed' in s or 'Test timed out' in s or 'signal' in s:
                    why = [x.replace('[----]', '').strip() for x in since[i:i + 4]]
                    why = [x for x in why if x]
                    break
            out.append('failed: %s: %s: %s' % (name, '::'.join(t for t in test if t),
                                              ' / '.join(why) or l.strip()))
        else:
            since.append(l)
    return out


def count(paths, skipped=None, failing=None):
    ok = bad = skip = 0
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            text = (r.get('stdout', '') + '\n' + (r.get('stderr') or '')).splitlines()
            skips = [l.split('[SKIP] ', 1)[1].split('[----]')[0].strip() for l in text
                     if '[SKIP] ' in l and not l.rstrip().endswith(': Test is disabled')]
            for l in text:
                if 'Synthesis: Tested:' in l:
                    f = {k.strip(): int(v) for k, v in
                         (p.split(':') for p in l.split('Synthesis:')[1].split('|'))}
                    ok += f.get('Passing', 0)
                    failed = f.get('Failing', 0) + f.get('Crashing', 0)
                    bad += failed
                    skip += f.get('Skipped', 0) + len(skips)
                    if skipped is not None:
                        skipped += ['%s: %s' % (r.get('name', '?'), s) for s in skips]
                    if failing is not None:
                        failing += failures(r.get('name', '?'), text)
                    if r['result'] not in ('OK', 'EXPECTEDFAIL', 'SKIP') and not failed:
                        bad += 1
                    break
            else:
                if r['result'] in ('OK', 'EXPECTEDFAIL'):
                    ok += 1
                elif r['result'] == 'SKIP':
                    skip += 1
                    if skipped is not None:
                        skipped.append('%s: exited 77 (skip)' % r.get('name', '?'))
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
    skipped, failed = [], []
    ok, bad, skip = count(args, skipped, failed)
    for s in skipped:
        print('skipped: ' + s, file=sys.stderr)
    for s in failed:
        print(s, file=sys.stderr)
    print("%d %d %d" % (ok, bad, skip) if counts else
          "%stests: %d passed, %d failed, %d skipped" % (prefix, ok, bad, skip))


if __name__ == '__main__':
    main()
