#!/usr/bin/env python3
"""A small CNN trained with PyTorch on synthetic images: the real trainer
dlflame's tests and benchmarks profile (Debian's python3-torch, oneDNN
inside). No downloads: the data is made here, with a fixed seed.

    python3 examples/cnn_train.py [STEPS] [--threads N]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def make_batch(gen, batch):
    x = torch.randn(batch, 3, 32, 32, generator=gen)
    # the label is a function of the image, so the loss can fall
    y = (x[:, 0, :16, :16].mean(dim=(1, 2)) > 0).long() + 2 * (x[:, 1].mean(dim=(1, 2)) > 0).long()
    return x, y


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", nargs="?", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    t0 = time.monotonic()
    first = last = None
    for step in range(args.steps):
        x, y = make_batch(gen, args.batch)
        last = train_step(model, opt, x, y)
        if first is None:
            first = last
    secs = time.monotonic() - t0
    print(f"cnn: {args.steps} steps, batch {args.batch}, {args.steps * args.batch / secs:.1f} "
          f"images/s, loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
