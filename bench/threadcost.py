#!/usr/bin/env python3
"""Run a command; print the CPU time and context switches of each of its threads.

Usage: threadcost.py OUT -- CMD [ARGS...]
The command's stdout and stderr are its own. Its threads (not its children's:
/proc/PID/task) are read every 100 ms: each thread's last reading is kept, so a
thread that exits is counted up to at most 100 ms before it did. OUT gets one
line per thread name (threads of one name summed), tab-separated:
    name  user_ms  system_ms  voluntary_cs  involuntary_cs  threads
then "(exited)" for what the process's total holds beyond its threads' last
readings, and "wall_s  SECONDS" (from the start to the exit). When the
command has a child (dlflame record's trainer): "child_s  SECONDS" from the
child's first reading to the first reading without it, and "child_cpu_ms
MS", the command's own CPU (all its threads, user + system) over that span:
what it spent while the trainer ran, apart from its start and its end.
Exits with the command's status.
"""
import os
import subprocess
import sys
import time

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def stat_times(path):
    """utime, stime in ms from a /proc stat file (the comm may hold spaces)."""
    with open(path) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): utime is field 14, stime 15
    return int(fields[11]) * TICK_MS, int(fields[12]) * TICK_MS


def status(path):
    name, vcs, nvcs = "?", 0, 0
    with open(path) as f:
        for line in f:
            if line.startswith("Name:"):
                name = line.split(None, 1)[1].strip() if len(line.split()) > 1 else ""
            elif line.startswith("voluntary_ctxt_switches:"):
                vcs = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                nvcs = int(line.split()[1])
    return name, vcs, nvcs


def sample(pid, threads, total):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        total[:] = stat_times(f"/proc/{pid}/stat")
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        return
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            u, s = stat_times(base + "/stat")
            name, vcs, nvcs = status(base + "/status")
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
        threads[tid] = (name, u, s, vcs, nvcs)


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: threadcost.py OUT -- CMD [ARGS...]")
    out = sys.argv[1]
    t0 = time.monotonic()
    p = subprocess.Popen(sys.argv[3:])
    threads, total = {}, [0.0, 0.0]
    child = child_t0 = child_t1 = None
    cpu0 = cpu1 = 0.0
    while p.poll() is None:
        sample(p.pid, threads, total)
        now, cpu = time.monotonic(), total[0] + total[1]
        if child is None:
            try:
                kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
            except OSError:
                kids = []
            if kids:
                child, child_t0, cpu0 = kids[0], now, cpu
        elif child_t1 is None and not os.path.exists(f"/proc/{child}"):
            child_t1, cpu1 = now, cpu
        time.sleep(0.1)
    wall = time.monotonic() - t0
    by_name = {}
    for name, u, s, vcs, nvcs in threads.values():
        a = by_name.setdefault(name, [0.0, 0.0, 0, 0, 0])
        a[0] += u
        a[1] += s
        a[2] += vcs
        a[3] += nvcs
        a[4] += 1
    su = sum(a[0] for a in by_name.values())
    ss = sum(a[1] for a in by_name.values())
    with open(out, "w") as f:
        for name, a in sorted(by_name.items()):
            f.write("%s\t%.0f\t%.0f\t%d\t%d\t%d\n" % (name.replace(" ", "_"), *a))
        f.write("(exited)\t%.0f\t%.0f\t0\t0\t0\n" % (max(total[0] - su, 0), max(total[1] - ss, 0)))
        f.write("wall_s\t%.3f\n" % wall)
        if child_t0 is not None and child_t1 is not None:
            f.write("child_s\t%.3f\n" % (child_t1 - child_t0))
            f.write("child_cpu_ms\t%.0f\n" % (cpu1 - cpu0))
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
