#!/usr/bin/env python3
"""Data-parallel training on CPU with torch.distributed (gloo) and Debian's
python3-torch: the small CNN of cnn_train.py, one process per rank.

Without RANK in its environment this is the launcher: it starts one process
per rank the way torchrun does (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT in each one's environment) and waits for them.
(Debian's torchrun 1.13 fails under Python 3.11.) With RANK set it is one
rank. --slow-rank R makes rank R do extra work before each step: the
straggler that the other ranks wait for in the gradient all-reduce.

With --backend mpi it is started by MPI's launcher instead, one process per
rank, each its rank from MPI (a PyTorch built with MPI: Debian 13's and unstable's):

    python3 examples/ddp_train.py [STEPS] [--world N] [--slow-rank R]
    mpirun -np 2 python3 examples/ddp_train.py [STEPS] --backend mpi [--slow-rank R]
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    port = os.environ.get("MASTER_PORT") or str(free_port())
    procs = []
    for rank in range(args.world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(args.world), LOCAL_WORLD_SIZE=str(args.world),
                   MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"), MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    return max(p.wait() for p in procs)


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cnn_train import Net, make_batch

    torch.set_num_threads(1)
    if args.backend == "mpi":
        dist.init_process_group("mpi")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        # PyTorch 2.x's TCPStore defaults to libuv, which Debian builds torch
        # without ("use_libuv was requested but PyTorch was build without libuv
        # support"); its own socket server works on every version (1.13 ignores this).
        os.environ.setdefault("USE_LIBUV", "0")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1 + rank)
    t0 = time.monotonic()
    loss = None
    for _ in range(args.steps):
        x, y = make_batch(gen, args.batch)
        if rank == args.slow_rank:
            extra_work(x)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # the gradients' all-reduce runs here
        opt.step()
    secs = time.monotonic() - t0
    print(f"ddp rank {rank}/{world}: {args.steps} steps, {args.steps * args.batch / secs:.1f} "
          f"images/s, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


def extra_work(x):
    """What makes a straggler: a slow data pipeline, here some arithmetic."""
    import torch
    for _ in range(30):
        x = torch.tanh(x @ torch.ones(x.shape[-1], x.shape[-1]) * 0.01)
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", nargs="?", type=int, default=40)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--backend", choices=("gloo", "mpi"), default="gloo")
    args = ap.parse_args()
    if "RANK" in os.environ or args.backend == "mpi":
        rank_main(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
