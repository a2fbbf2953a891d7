#!/usr/bin/env python3
"""Run a command; print its wall time (s) and peak RSS (MiB) of its process tree.

Usage: measure.py LABEL -- CMD [ARGS...]      (stdout of CMD goes to /dev/null)
Prints: LABEL<TAB>seconds<TAB>peak_MiB<TAB>exit_status
"""
import resource
import subprocess
import sys
import time


def main():
    label = sys.argv[1]
    cmd = sys.argv[sys.argv.index('--') + 1:]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    print("%s\t%.3f\t%.1f\t%d" % (label, dt, rss, p.returncode))


if __name__ == '__main__':
    main()
