#!/usr/bin/python3
"""torch.optim.Adam's step on the CPU of this machine: parameter elements updated per second.

    /usr/bin/python3 bench/python/cpu_adam_rate.py [--sizes 10,50,100] [--threads 1,2]

The one part of a host optimizer step (FSDP CPUOffload's torch.optim step, docs/distributed.md)
that a machine without a GPU can measure. A "model" of S million fp32 parameters is split into
tensors of 4M elements (a transformer layer's matrices are of that order), each with a gradient;
Adam's state is made by a first step, then the median of `--repeats` steps is timed, foreach and
single-tensor, at each thread count. Prints one line per case and the rate in elements per second.
"""
import argparse
import statistics
import time

import torch

CHUNK = 4 * 1024 * 1024


def model(million):
    total = million * 1000 * 1000
    sizes = [CHUNK] * (total // CHUNK)
    if total % CHUNK:
        sizes.append(total % CHUNK)
    params = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    return params, total


def time_step(params, foreach, repeats):
    opt = torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    opt.step()  # creates exp_avg, exp_avg_sq and step
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - start)
    del opt
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,50,100", help="model sizes, millions of parameters")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available")
    for million in [int(s) for s in args.sizes.split(",")]:
        params, total = model(million)
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            for foreach in (False, True):
                s = time_step(params, foreach, args.repeats)
                print(f"{million:>5}M params ({len(params)} tensors) threads={threads} foreach={str(foreach):5}: "
                      f"{s * 1e3:9.1f} ms/step  {total / s / 1e6:7.1f} M elements/s  {s / total * 1e9:6.2f} s per 1e9")
        del params


if __name__ == "__main__":
    main()
