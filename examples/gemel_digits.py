"""GEMEL end to end on scikit-learn's bundled digits (8x8 images, no download): three small CNNs
of one family, each trained alone for its own task on the same images (which digit, its parity,
whether it is greater than 4), then merged and jointly retrained by headroom (pack's merge plan,
headroom.joint_train's loop with back-off). Prints the memory saved and each task's accuracy
before and after.

    PYTHONPATH=build/release/python /usr/bin/python3 examples/gemel_digits.py [--small] [--log rounds.json]

--small trains fewer epochs (what `make test` runs, python/tests/test_gemel_example.py).
Deterministic on one thread: the same numbers on every run of one machine.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

import headroom

TASKS = [  # name, classes, label from the digit
    ("digit", 10, lambda d: d),
    ("parity", 2, lambda d: d % 2),
    ("greater_than_4", 2, lambda d: (d > 4).long()),
]


class DigitsCNN(nn.Module):
    """conv 1->16 -> conv 16->32 -> pool -> conv 32->32 -> fc 512->64 -> fc 64->classes."""

    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.conv3(x))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def loaders(images, digits, label, batch, seed):
    ds = torch.utils.data.TensorDataset(images, label(digits))
    g = torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, generator=g)


def train_alone(model, loader, epochs):
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()


def swapping(models, x, names, plan, kept):
    """pack's swap simulation with the merges kept: room for the weights of two models, requests
    cycling through the three (30 per second each, 1 ms of execution), LRU."""
    room = plan["models"][0]["weights_bytes"] * 2
    workload = {"window_s": 2, "weights_capacity": room, "load": {"bandwidth_gb_per_s": 1},
                "models": [{"model": n, "fps": 30, "phase_ms": 10 * i, "latency_ms": 100, "exec_ms": 1}
                           for i, n in enumerate(names)]}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "workload.json")
        with open(path, "w") as f:
            json.dump(workload, f)
        rep = headroom.pack(models, x, names=names, workload=path, merged_groups=kept)
    print(f"swapping ({room:,} bytes for weights, LRU, {kept} merge groups kept):")
    for sharing in ("unshared", "shared"):
        run = rep["simulation"]["lru"][sharing]
        loads = sum(m["loads"] for m in run["models"])
        print(f"  {'no sharing' if sharing == 'unshared' else 'merged':<10} loads {loads:>4}  moved "
              f"{run['bytes_moved']:>10,} bytes  load wait {run['load_wait_ms']:.3f} ms")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="fewer epochs (the make-test run)")
    ap.add_argument("--log", help="write joint_train's JSON log of rounds here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    alone_epochs, joint_epochs = (6, 3) if args.small else (20, 8)

    d = load_digits()
    images = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    digits = torch.tensor(d.target, dtype=torch.long)
    order = torch.randperm(len(digits), generator=torch.Generator().manual_seed(0))
    train, val = order[:1400], order[1400:]

    models, train_loaders, val_loaders = [], [], []
    t0 = time.monotonic()
    for k, (name, classes, label) in enumerate(TASKS):
        model = DigitsCNN(classes)
        tl = loaders(images[train], digits[train], label, 64, k)
        vl = loaders(images[val], digits[val], label, 256, 100 + k)
        train_alone(model, tl, alone_epochs)
        models.append(model)
        train_loaders.append(tl)
        val_loaders.append(vl)
    alone_s = time.monotonic() - t0

    names = [t[0] for t in TASKS]
    plan = headroom.pack(models, images[:1], names=names)
    log = headroom.joint_train(models, train_loaders, [F.cross_entropy] * len(models), val_loaders, plan=plan,
                               budget={"epochs": joint_epochs}, tolerance=0.01, log_path=args.log)
    merged = log["merge"]

    unshared = merged.unique_bytes_before
    after = merged.unique_bytes
    print(f"3 models trained alone in {alone_s:.1f} s ({alone_epochs} epochs each); pack: {len(plan['groups'])} "
          f"merge groups, {plan['saved_bytes']:,} of {plan['unshared_weights_bytes']:,} bytes if all merged")
    print(f"{'task':<16} {'weights':>9} {'alone':>7} {'target':>7} {'merged':>7}")
    for i, name in enumerate(names):
        w = plan["models"][i]["weights_bytes"]
        print(f"{name:<16} {w:>9,} {log['accuracy_before'][i]:>7.4f} {log['targets'][i]:>7.4f} "
              f"{log['rounds'][-1]['accuracy'][i]:>7.4f}")
    rounds = ", ".join(f"{r['groups']} group{'' if r['groups'] == 1 else 's'} {'kept' if r['kept'] else 'backed off'}"
                       for r in log["rounds"])
    print(f"rounds: {len(log['rounds'])} ({rounds}), {log['seconds']:.1f} s")
    print(f"memory: {unshared:,} bytes unshared -> {after:,} merged: {merged.saved_bytes:,} saved "
          f"({100.0 * merged.saved_bytes / unshared:.1f}%; pack predicted {merged.predicted_saved_bytes:,}); "
          "GEMEL reports up to 60.7%")
    swapping(models, images[:1], names, plan, len(log["merged_groups"]))
    if merged.saved_bytes != merged.predicted_saved_bytes:
        print("error: measured saving differs from pack's prediction", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
