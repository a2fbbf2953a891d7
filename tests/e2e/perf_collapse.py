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
"""
import collections
import re
import sys


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
    frame_re = re.compile(r'^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$')

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
        sym, dso = m.group(1), m.group(2)
        if not dso.endswith(module):
            continue
        frames.append(re.sub(r'\+0x[0-9a-f]+$', '', sym))
    flush()
    for stack in sorted(counts):
        print('%s %d' % (stack, counts[stack]))


if __name__ == '__main__':
    main()
