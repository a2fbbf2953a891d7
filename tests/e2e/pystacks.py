#!/usr/bin/env python3
"""Judges folded stacks with Python frames, for the Python e2e tests.

    pystacks.py split FOLDED JSON      the split.py fixture (JSON: its own line)
    pystacks.py split-exact FOLDED JSON   the same, frames taken at the sample (BPF):
                                       main on 99.5% of the stacks below <module>
    pystacks.py threads FOLDED JSON    threads.py, FOLDED made with --per-thread
    pystacks.py cnn FOLDED             examples/cnn_train.py
    pystacks.py has FOLDED FRAME...    each FRAME is in some stack

Prints what it measured; exits 1 with the reason when a check fails.
"""
import json
import re
import sys

PY = re.compile(r"^(.+) \(([^()]+\.py)(?::\d+)?\)$")
PLACEHOLDERS = ("[python frames changed before read]", "[python frames not read]",
                "[python code freed before named]")
# one frame whose code object could not be named (freed, or its process gone)
UNNAMED = "[python code freed before named]"


def read_folded(path):
    stacks = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            stacks.append((stack.split(";"), int(count)))
    return stacks


def py_frames(frames, file=None, unnamed=False):
    """The Python frames (of file); with unnamed, None for each unnamed one."""
    out = []
    for fr in frames:
        m = PY.match(fr)
        if m and (file is None or m.group(2) == file):
            out.append(m.group(1))
        elif unnamed and fr == UNNAMED:
            out.append(None)
    return out


def fits(py, chain):
    """py is a prefix of chain; an unnamed frame (None) may be any one frame of it, or a
    frame of another file (none of chain's)."""
    at = {0}  # how far into chain py's frames so far can reach
    for p in py:
        if p is None:
            at = at | {k + 1 for k in at if k < len(chain)}
        else:
            at = {k + 1 for k in at if k < len(chain) and chain[k] == p}
        if not at:
            return False
    return True


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def split(folded, measured, exact=False):
    shares = json.loads(measured)["shares"]
    chains = [["<module>", "main", "spin_a"], ["<module>", "main", "sort_b", "key_b"],
              ["<module>", "main", "spin_c"]]
    stacks = read_folded(folded)
    with_py = whole = below = below_whole = 0
    count = {k: 0 for k in shares}
    bad = []
    for frames, n in stacks:
        py = py_frames(frames, "split.py")
        holes = sum(fr in PLACEHOLDERS for fr in frames)
        if not py and not holes:
            continue
        with_py += n
        # a name the program cannot have there; an unnamed frame holds any one place
        if not any(fits(py_frames(frames, "split.py", True), c) for c in chains):
            bad.append((";".join(frames), n))
        if not holes and py[:2] == ["<module>", "main"]:
            whole += n
        # below <module>: every stack but those of the module's own code and of the
        # interpreter's start-up (their imports, whose module bodies may be freed before
        # they are named: those are no hole here)
        lost = sum(fr in PLACEHOLDERS and fr != UNNAMED for fr in frames)
        if lost or py not in ([], ["<module>"]):
            below += n
            if not holes and py[:2] == ["<module>", "main"]:
                below_whole += n
        for k in count:
            if k in py:
                count[k] += n
    total = sum(count.values())
    print(f"samples with Python frames {with_py}, whole chains {whole} "
          f"({100.0 * whole / max(with_py, 1):.1f}%), impossible chains {len(bad)}")
    for k in shares:
        print(f"  {k}: measured {100 * shares[k]:.1f}%, profiled "
              f"{100.0 * count[k] / max(total, 1):.1f}%")
    if bad:
        fail("a chain the program cannot produce: %s (%d)" % bad[0])
    if with_py < 200:
        fail(f"only {with_py} samples with Python frames")
    if whole < 0.95 * with_py:
        fail(f"only {100.0 * whole / with_py:.1f}% of samples show the whole Python chain")
    points = 3.0 if exact else 5.0
    for k in shares:
        if abs(100.0 * count[k] / total - 100.0 * shares[k]) > points:
            fail(f"{k}: profiled share {100.0 * count[k] / total:.1f}% is more than {points:.0f} "
                 f"points from the measured {100.0 * shares[k]:.1f}%")
    print(f"stacks below <module> {below}, with <module>;main and no placeholder "
          f"{below_whole} ({100.0 * below_whole / max(below, 1):.2f}%)")
    if exact and below_whole < 0.995 * below:
        fail(f"<module>;main in only {100.0 * below_whole / below:.2f}% of the stacks below "
             f"<module> (frames taken at the sample: 99.5% at least)")


def threads(folded, measured):
    tids = json.loads(measured)
    stacks = read_folded(folded)
    own = {"alpha": "alpha_work", "beta": "beta_work"}
    for name, tid in tids.items():
        mine = other = 0
        for frames, n in stacks:
            if not frames[0].endswith(f"/{tid}"):
                continue
            py = py_frames(frames, "threads.py")
            mine += n if own[name] in py else 0
            other += n if any(v in py for k, v in own.items() if k != name) else 0
        print(f"thread {name} ({tid}): {mine} samples in {own[name]}, {other} in the other's")
        if mine < 50:
            fail(f"thread {name}: only {mine} samples show {own[name]}")
        if other:
            fail(f"thread {name}: {other} samples show the other thread's function")


KERNEL = re.compile(r"sgemm|gemm_kernel|^_?jit_|brgemm|_kernel_f32")


def cnn(folded):
    """Compute-kernel samples under the training step; convolution forward
    (at::native::mkldnn_convolution) under a module's forward, convolution
    backward (convolution_backward) under backward, the linear layers'
    forward (at::_ops::linear::call) under Linear.forward; JIT names kept.
    Where a kernel's own Python frames are a placeholder (they changed before
    they were read: see the README), they are not judged, but most must be
    shown."""
    stacks = read_folded(folded)
    kern = step = fwd = fwd_under = bwd = bwd_under = jit_named = 0
    fwd_all = bwd_all = lin_all = lin = lin_under = 0
    for frames, n in stacks:
        if not any(KERNEL.search(fr) for fr in frames):
            continue
        kern += n
        py = py_frames(frames)
        if any(fr.startswith("at::_ops::linear::call(") for fr in frames):
            lin_all += n
            if not any(fr in PLACEHOLDERS for fr in frames):
                lin += n
                lin_under += n if "Linear.forward" in py else 0
        step += n if "train_step" in py else 0
        if any(fr.endswith("_[j]") for fr in frames):
            jit_named += n
        backward = any(fr.startswith("at::native::convolution_backward") for fr in frames)
        forward = not backward and any(fr.startswith("at::native::mkldnn_convolution(")
                                       for fr in frames)
        shown = not any(fr in PLACEHOLDERS for fr in frames)
        fwd_all += n if forward else 0
        bwd_all += n if backward else 0
        forward = forward and shown
        backward = backward and shown
        if forward:
            fwd += n
            fwd_under += n if (any(p.endswith(".forward") for p in py) and
                               not any(p.endswith("backward") for p in py)) else 0
        if backward:
            bwd += n
            bwd_under += n if any(p.endswith("backward") for p in py) else 0
    print(f"kernel samples {kern}: under train_step {100.0 * step / max(kern, 1):.1f}%; "
          f"JIT-named {jit_named}; conv forward {fwd_all}, shown {fwd} ({fwd_under} under a "
          f"forward); conv backward {bwd_all}, shown {bwd} ({bwd_under} under backward); "
          f"linear forward {lin_all}, shown {lin} ({lin_under} under Linear.forward)")
    if kern < 100:
        fail(f"only {kern} samples in compute kernels")
    if step < 0.95 * kern:
        fail(f"only {100.0 * step / kern:.1f}% of kernel samples show train_step")
    if not jit_named:
        fail("no oneDNN JIT kernel names")
    for what, total, shown, under in (("convolution forward", fwd_all, fwd, fwd_under),
                                      ("convolution backward", bwd_all, bwd, bwd_under),
                                      ("linear forward", lin_all, lin, lin_under)):
        if total < 20 or shown < 0.75 * total:
            fail(f"{what}: Python frames shown for {shown} of {total} samples")
        if under < 0.99 * shown:
            fail(f"{what}: {under} of {shown} samples under its Python code")


def has(folded, names):
    stacks = read_folded(folded)
    for name in names:
        n = sum(c for frames, c in stacks if name in frames)
        print(f"{name}: {n}")
        if not n:
            fail(f"no stack has {name}")


def main():
    cmd = sys.argv[1]
    if cmd == "split":
        split(sys.argv[2], open(sys.argv[3]).read())
    elif cmd == "split-exact":
        split(sys.argv[2], open(sys.argv[3]).read(), exact=True)
    elif cmd == "threads":
        threads(sys.argv[2], open(sys.argv[3]).read())
    elif cmd == "cnn":
        cnn(sys.argv[2])
    elif cmd == "has":
        has(sys.argv[2], sys.argv[3:])
    else:
        fail(f"unknown command {cmd}")


main()
