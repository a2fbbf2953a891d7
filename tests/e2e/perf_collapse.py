#!/usr/bin/env python3
"""Collapse `perf script -F comm,tid,ip,sym,dso` output into folded stacks.

Usage: perf_collapse.py MODULE < script.txt
       perf_collapse.py --keep NAME,NAME,... < folded.txt
       perf_collapse.py --keep-from FOLDED < folded.txt
The second form filters folded stacks (dlflame's) down to the named frames and
merges the lines that become equal, so both tools' outputs compare line by line.
The third keeps the names that FOLDED (the first form's output) has below its
first frame: every function of MODULE perf named, so that a frame dlflame
names otherwise, or drops, shows in the comparison.
Keeps only frames whose dso path ends with MODULE (so that two tools can be
compared on the frames both must name identically), prints `comm;f1;...;fn count`
lines sorted, root first, like stackcollapse-perf.pl.

perf 6.1 names the PLT stubs after `_init` (a symbol of .init, stretched to the
next symbol across sections); dlflame names code no symbol of its own section
covers after its module and address, `split+0x1020`, and so does this script
for a `_init` frame outside .init.
"""
import collections
import os
import re
import subprocess
import sys

_init_ranges = {}


def init_range(dso):
    """[start, end) of dso's .init section (ELF addresses); (0, 0) if none."""
    if dso not in _init_ranges:
        r = (0, 0)
        try:
            out = subprocess.run(['readelf', '-SW', dso], capture_output=True,
                                 text=True, check=False).stdout
        except OSError:
            out = ''
        for line in out.splitlines():
            f = line.replace('[ ', '[').split()
            if len(f) > 5 and f[1] == '.init':
                start, size = int(f[3], 16), int(f[5], 16)
                r = (start, start + size)
        _init_ranges[dso] = r
    return _init_ranges[dso]


def keep_only(names):
    counts = collections.Counter()
    for line in sys.stdin:
        stack, _, n = line.rstrip('\n').rpartition(' ')
        frames = stack.split(';')
        kept = [frames[0]] + [f for f in frames[1:] if f in names]
        counts[';'.join(kept)] += int(n)
    for stack in sorted(counts):
        print('%s %d' % (stack, counts[stack]))


def main():
    if sys.argv[1] == '--keep':
        keep_only(set(sys.argv[2].split(',')))
        return
    if sys.argv[1] == '--keep-from':
        names = set()
        with open(sys.argv[2]) as f:
            for line in f:
                names.update(line.rstrip('\n').rpartition(' ')[0].split(';')[1:])
        keep_only(names)
        return
    module = sys.argv[1]
    counts = collections.Counter()
    comm, frames = None, []
    frame_re = re.compile(r'^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$')

    def flush():
        if comm is not None:
            counts[';'.join([comm] + list(reversed(frames)))] += 1

    for line in sys.stdin:
        if not line.strip():
            continue
        if not line[0].isspace():
            flush()
            comm, frames = line.split()[0], []
            continue
        m = frame_re.match(line)
        if not m:
            continue
        ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if not dso.endswith(module):
            continue
        name = re.sub(r'\+0x[0-9a-f]+$', '', sym)
        start, end = init_range(dso)
        if name == '_init' and not start <= ip < end:
            name = '%s+0x%x' % (os.path.basename(dso), ip)
        frames.append(name)
    flush()
    for stack in sorted(counts):
        print('%s %d' % (stack, counts[stack]))


if __name__ == '__main__':
    main()
