#!/usr/bin/env python3
"""Runs the command blocks of the README and docs/ that are marked runnable.

A block is runnable when the line before its opening fence is
`<!-- runnable -->`. Its lines run with bash -euo pipefail in a fresh
directory where `build` and `examples` lead to the build and the sources'
examples, `dlflame` is on PATH, and the files earlier blocks of the same
page wrote are still there (a page reads in order: record, then report).
A block that fails, or runs past its time, fails the test with its page,
line and output.

    run_blocks.py SOURCE_ROOT BUILD_ROOT [FILE.md...]

Without files: the README and every page of docs/.
"""
import os
import re
import shutil
import subprocess
import sys
import glob
import tempfile

MARK = '<!-- runnable -->'
FENCE = re.compile(r'^(\s*)(```|~~~)')
TIMEOUT = 600


def blocks(path):
    """(line number, text) of each runnable block of a markdown file."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            m = FENCE.match(lines[j]) if j < len(lines) else None
            if not m:
                raise SystemExit('%s:%d: %s is not followed by a fenced block' %
                                 (path, i + 1, MARK))
            k = j + 1
            while k < len(lines) and not lines[k].strip().startswith(m.group(2)):
                k += 1
            if k == len(lines):
                raise SystemExit('%s:%d: the block never closes' % (path, j + 1))
            out.append((j + 2, '\n'.join(l[len(m.group(1)):] for l in lines[j + 1:k])))
            i = k
        i += 1
    return out


def main():
    src, build, pages = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not pages:
        pages = [os.path.join(src, 'README.md')] + sorted(glob.glob(os.path.join(src, 'docs', '*.md')))
    ok = bad = 0
    env = dict(os.environ, PATH=os.path.join(build, 'cmd') + ':' + os.environ['PATH'],
               TERM='dumb')
    for page in pages:
        found = blocks(page)
        if not found:
            continue
        work = tempfile.mkdtemp(prefix='dlflame-docs-')
        try:
            os.symlink(build, os.path.join(work, 'build'))
            os.symlink(os.path.join(src, 'examples'), os.path.join(work, 'examples'))
            for line, text in found:
                where = '%s:%d' % (os.path.relpath(page, src), line)
                try:
                    r = subprocess.run(['bash', '-euo', 'pipefail', '-c', text], cwd=work,
                                       env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       timeout=TIMEOUT)
                    status = r.returncode
                    output = r.stdout.decode(errors='replace')
                except subprocess.TimeoutExpired as e:
                    status = 'timeout after %d s' % TIMEOUT
                    output = (e.stdout or b'').decode(errors='replace')
                if status == 0:
                    ok += 1
                    print('ok: %s' % where)
                else:
                    bad += 1
                    print('FAILED: %s (exit %s):\n%s\n%s' % (where, status, text,
                                                            output[-3000:]))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print('%d passed, %d failed' % (ok, bad))
    return 1 if bad or not ok else 0


if __name__ == '__main__':
    sys.exit(main())
