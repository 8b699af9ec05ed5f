#!/usr/bin/env python3
"""PyTorch's step time for the CNN demo's network (examples/cnn_demo.cpp): the same layers,
initial-value scheme, loss and Adam(lr=0.001), on synthetic data of the demo's batch size.

Usage: cnn_torch.py [--batch N] [--threads N] [--steps N]
Prints "torch_step_ms <median>" on stdout; exits with status 3 when torch cannot be imported.
Run it with Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"cnn_torch.py: cannot import torch ({e})", file=sys.stderr)
    sys.exit(3)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding="same")
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding="same")
        self.hidden = torch.nn.Linear(7 * 7 * 64, 128)
        self.logits = torch.nn.Linear(128, 10)
        self.dropout = torch.nn.Dropout(0.25)

    def forward(self, x):
        h = x.view(-1, 1, 28, 28)
        h = F.max_pool2d(F.relu(self.conv1(h)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.relu(self.hidden(h.flatten(1)))
        return self.logits(self.dropout(h))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Cnn()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    x = torch.rand(args.batch, 784)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):  # warm-up: allocator, oneDNN primitive caches
        step()
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    print(f"torch_step_ms {statistics.median(ms):.3f}")


if __name__ == "__main__":
    main()
