#!/usr/bin/python3
"""Capture + estimate time against one real CPU training step, as a ratio measured in one run.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/capture_vs_step.py [--batch 4]

Models: torchvision resnet50 (224x224) and a hand-written 24-layer transformer encoder (dim 256,
4 heads, sequence 128) made of calls capture maps. Each side is timed on its second run (the first
warms PyTorch's and headroom's caches); the real step is forward, backward, Adam step and
zero_grad with torch.set_num_threads(1), as validation measures.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import headroom


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=2)
        q = q.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / (d // self.heads) ** 0.5, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, layers=24, dim=256, heads=4, classes=10):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def timed(fn):
    fn()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name, model, x, y):
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    opt = torch.optim.Adam(model.parameters())

    def predict():
        return headroom.estimate(model, x, loss_fn=loss_fn, optimizer="adam", device="cpu")["peak_bytes"]

    def step():
        loss_fn(model(x)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t_predict = timed(predict)
    t_step = timed(step)
    print(f"{name:28s} capture+estimate {t_predict * 1000:9.1f} ms   real step {t_step * 1000:9.1f} ms   "
          f"ratio {t_predict / t_step:.3f}   (peak predicted {predict():,} B)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    y = torch.randint(0, 10, (a.batch,))
    compare(f"resnet50 b{a.batch} 224x224", torchvision.models.resnet50(num_classes=10),
            torch.randn(a.batch, 3, 224, 224), y)
    compare(f"transformer 24x256 b{a.batch} s128", Transformer(), torch.randn(a.batch, 128, 256), y)


if __name__ == "__main__":
    main()
