#!/usr/bin/python3
"""Whole-process time of the CLI (start-up included), side by side in one run, min of N runs each
(this machine is shared and noisy; the minimum is the least disturbed run).

Rows:
  true                  /bin/true: the process floor of this machine
  estimate resnet50     built-in model: loads no plugin
  estimate llama-3.1-70b  a Hugging Face config.json (data/hf-configs), inference at seq 128
  ... + old link        the same with ONNX, protobuf and COIN-OR CBC preloaded (LD_PRELOAD): what
                        start-up cost when the CLI linked them (before the plugin boundary)
  estimate x.onnx       an ONNX file: opens the headroom-onnx.so plugin (ONNX + protobuf)

    /usr/bin/python3 bench/process_start.py [BUILD_DIR] [--runs N]
"""
import argparse
import os
import resource
import subprocess
import sys
import time

OLD_LINK = ["libonnx.so.1", "libonnx_proto.so.1", "libprotobuf.so.32", "libCbcSolver.so.3"]


def best_ms(cmd, runs, env=None):
    """(min wall ms, min CPU ms) over `runs` runs; CPU = the child's user + system time, which a
    busy machine disturbs far less than wall time."""
    best_wall = best_cpu = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        dt = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {r.stderr.decode().strip()}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best_wall = min(best_wall, dt)
        best_cpu = min(best_cpu, cpu)
    return best_wall * 1000, best_cpu * 1000


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser()
    p.add_argument("build", nargs="?", default=os.path.join(here, "build", "release"))
    p.add_argument("--runs", type=int, default=10)
    a = p.parse_args()
    cli = os.path.join(a.build, "headroom")
    preload = dict(os.environ, LD_PRELOAD=" ".join(OLD_LINK))
    resnet = [cli, "estimate", "resnet50"]
    llama = [cli, "estimate", os.path.join(here, "data/hf-configs/llama-3.1-70b.json")]
    onnx = [cli, "estimate", os.path.join(here, "tests/data/onnx/resnet18_training.onnx")]
    rows = [
        ("true", ["/bin/true"], None),
        ("estimate resnet50", resnet, None),
        ("estimate resnet50 + old link", resnet, preload),
        ("estimate llama-3.1-70b config", llama, None),
        ("estimate llama-3.1-70b config + old link", llama, preload),
        ("estimate resnet18_training.onnx (plugin)", onnx, None),
    ]
    times = {}
    for name, cmd, env in rows:
        times[name] = best_ms(cmd, a.runs, env)
    print(f"min of {a.runs} runs each, one run of this script; wall and CPU (user + system) time")
    print(f"  {'':44s} {'wall':>9s} {'CPU':>9s}")
    for name, _, _ in rows:
        wall, cpu = times[name]
        print(f"  {name:48s} {wall:6.2f} ms {cpu:6.2f} ms")
    for what in ("estimate resnet50", "estimate llama-3.1-70b config"):
        old, new = times[what + " + old link"], times[what]
        print(f"  {what}: old link / plugins = {old[0] / new[0]:.2f}x wall, {old[1] / new[1]:.2f}x CPU")


if __name__ == "__main__":
    main()
