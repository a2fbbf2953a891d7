#!/usr/bin/env python3
"""Which file of a folder calls which, and whether any of them call each other in a circle.

Usage: calls.py FOLDER [FOLDER...]
For each FOLDER (a stage: sampler/, collect/, ...), every function defined
without `static` at the start of a line in one of its .c files, and every
file of the folder that calls it (its name followed by an opening
parenthesis, outside comments and strings). Prints the edges, one file per
line, and exits 1 naming a circle if there is one (DESIGN.md: within a
folder no two files call each other in a circle). Calls through function
pointers are not seen: a folder must not call up through them either.
"""
import os
import re
import sys

DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?[\s\*]([a-z_]\w*)\(", re.M)


def strip(src):
    """The source without comments, string and character literals."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: " " if m.group(0)[0] == "/" else '""', src, flags=re.S)


def graph(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".c"))
    text = {f: strip(open(os.path.join(folder, f), encoding="utf-8").read()) for f in files}
    defined = {}
    for f in files:
        for m in DEF.finditer(text[f]):
            defined.setdefault(m.group(1), f)
    edges = {f: {} for f in files}
    for f in files:
        for fn, g in defined.items():
            if g != f and re.search(r"\b%s\s*\(" % re.escape(fn), text[f]):
                edges[f].setdefault(g, []).append(fn)
    return edges


def circle(edges):
    state, path = {}, []

    def visit(f):
        state[f] = 1
        path.append(f)
        for g in sorted(edges[f]):
            if state.get(g) == 1:
                return path[path.index(g):] + [g]
            if g not in state:
                c = visit(g)
                if c:
                    return c
        path.pop()
        state[f] = 2
        return None

    for f in sorted(edges):
        if f not in state:
            c = visit(f)
            if c:
                return c
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: calls.py FOLDER [FOLDER...]")
    bad = False
    for folder in sys.argv[1:]:
        edges = graph(folder)
        name = os.path.basename(os.path.normpath(folder))
        for f in sorted(edges):
            calls = " ".join("%s(%s)" % (g, ",".join(sorted(fns))) for g, fns in sorted(edges[f].items()))
            print("%s/%s -> %s" % (name, f, calls or "-"))
        c = circle(edges)
        if c:
            print("calls.py: %s/: these files call each other in a circle: %s" % (name, " -> ".join(c)),
                  file=sys.stderr)
            bad = True
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
