#!/usr/bin/env python3
"""The CNN trainer (cnn_train.py) under torch.profiler: the framework's own
operator table, to hold dlflame's `report --ops` against.

    python3 examples/cnn_torchprof.py [STEPS] [--threads N]

Prints one line per aten operator, tab-separated: name, self CPU us, total
CPU us, number of calls (key_averages(), grouped by name as torch.profiler's
table is), then the table torch.profiler prints itself.
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", nargs="?", type=int, default=40)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--table", action="store_true", help="also print torch's own table")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = cnn_train.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            x, y = cnn_train.make_batch(gen, args.batch)
            cnn_train.train_step(model, opt, x, y)
    for e in prof.key_averages():
        print(f"{e.key}\t{e.self_cpu_time_total:.0f}\t{e.cpu_time_total:.0f}\t{e.count}")
    if args.table:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
