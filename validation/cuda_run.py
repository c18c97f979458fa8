#!/usr/bin/python3
"""Measure the validation cases on the visible CUDA GPU (make validate-gpu; docs/gpu.md).

    python3 validation/cuda_run.py [--only SUBSTRING]... [--out validation/measured_cuda.json] [--list]

Every case of cases.py (the CPU harness's cases, the same models.py modules) runs in its own fresh
Python process on GPU 0, with the training loop of memtrace.run_case (two steps, zero_grad with
set_to_none=True). Around each phase (baseline, forward, backward, optimizer; inference: forward)
the worker synchronizes and records torch.cuda.max_memory_allocated / max_memory_reserved (then
resets the peaks), memory_allocated / memory_reserved, and what NVML reports as used by the
process and by the device. A case that runs out of memory is recorded as skipped (it does not fit
this GPU). The header names the GPU, its memory, the driver, CUDA, cuDNN and PyTorch versions and
CUDA_MODULE_LOADING. Works with PyTorch 1.13 to 2.x. Without CUDA: one line on stderr, exit 1.

The comparison (tests/cuda_validation_test.cc, run by make test when the file exists): headroom's
allocated peak within 1%, reserved peak within 3%, device total within 5% of what is measured here.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PHASES = ("forward", "backward", "optimizer")


def _is_oom(e):
    return "out of memory" in str(e).lower()


def worker(case_id):
    """Runs one case on cuda:0 in this process and prints 'RESULT <json>'."""
    import gc

    import torch

    import cases
    import memtrace
    import models
    import nvml_probe
    c = next(c for c in cases.CASES if c["id"] == case_id)
    nv = nvml_probe.Nvml()
    dev = torch.device("cuda", 0)
    marks = []

    def mark(name):
        torch.cuda.synchronize(dev)
        marks.append(dict(
            mark=name,
            allocated_peak_bytes=torch.cuda.max_memory_allocated(dev),
            reserved_peak_bytes=torch.cuda.max_memory_reserved(dev),
            allocated_bytes=torch.cuda.memory_allocated(dev),
            reserved_bytes=torch.cuda.memory_reserved(dev),
            nvml_process_used_bytes=nv.process_used(),
            nvml_device_used_bytes=nv.device_used()))
        torch.cuda.reset_peak_memory_stats(dev)

    # The CUDA context alone: cudaDeviceSynchronize creates the primary context, no allocation yet.
    torch.cuda.set_device(dev)
    torch.cuda.synchronize(dev)
    context = dict(nvml_process_used_bytes=nv.process_used(), nvml_device_used_bytes=nv.device_used())
    t0 = time.time()
    try:
        torch.manual_seed(0)
        model, x, y, loss_fn = models.build(c["model"], c["batch"], c.get("seq"), dropout=c.get("dropout", True),
                                            checkpoint=c.get("checkpoint_scheme"))
        train = c["mode"] == "train"
        if not train:
            del y
        # Parameters and buffers move one tensor at a time: one allocation each, as when a model
        # is built on the device (headroom's weights are allocated first, in parameter order).
        model.to(dev)
        loss_fn.to(dev)
        x = x.to(dev)
        if train:
            y = y.to(dev)
        model.train(train)
        opt = memtrace.make_optimizer(c["optimizer"], model.parameters(), c["foreach"]) if train else None
        gc.collect()
        gc.disable()
        mark("baseline")
        if not train:
            with torch.no_grad():
                out = model(x)
                del out
            mark("infer:forward")
        else:
            for s in (1, 2):
                out = model(x)
                loss = loss_fn(out, y)
                mark(f"step{s}:forward")
                loss.backward()
                del out, loss
                mark(f"step{s}:backward")
                opt.step()
                opt.zero_grad(set_to_none=True)
                mark(f"step{s}:optimizer")
        gc.enable()
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError (2.x) is a RuntimeError
        if not _is_oom(e):
            raise
        print("RESULT " + json.dumps(dict(id=case_id, skipped="out of memory: " + str(e).splitlines()[0][:200])),
              flush=True)
        return
    stats = torch.cuda.memory_stats(dev)
    keep = ("num_alloc_retries", "num_ooms", "segment.all.peak", "allocation.all.peak",
            "active_bytes.all.peak", "inactive_split_bytes.all.peak", "requested_bytes.all.peak")
    measured = dict(
        allocated_peak_bytes=max(m["allocated_peak_bytes"] for m in marks[1:]),
        reserved_peak_bytes=max(m["reserved_peak_bytes"] for m in marks[1:]),
        baseline_allocated_bytes=marks[0]["allocated_bytes"],
        context_nvml_process_bytes=context["nvml_process_used_bytes"],
        phases=marks,
        memory_stats={k: stats[k] for k in keep if k in stats},
        run_seconds=round(time.time() - t0, 2))
    # What nvidia-smi shows for the process: NVML's number at the marks (the caching allocator
    # never returns memory here, so the largest mark is the process's peak). Where NVML cannot see
    # this process (containers), the device's used memory above what it was before the case.
    nvml = [m["nvml_process_used_bytes"] for m in marks if m["nvml_process_used_bytes"] is not None]
    measured["device_total_bytes"] = max(nvml) if nvml else None
    measured["device_total_source"] = "nvml process" if nvml else None
    print("RESULT " + json.dumps(dict(id=case_id, measured=measured)), flush=True)


def header(nv):
    import torch
    p = torch.cuda.get_device_properties(0)
    return dict(
        gpu_name=torch.cuda.get_device_name(0),
        gpu_memory_bytes=p.total_memory,
        compute_capability=f"{p.major}.{p.minor}",
        driver_version=nv.driver_version(),
        cuda_version=torch.version.cuda,
        cudnn_version=torch.backends.cudnn.version(),
        torch_version=torch.__version__,
        python=platform.python_version(),
        # PyTorch >= 1.13 sets LAZY in its own process when unset (CUDA >= 11.7); the workers inherit it.
        cuda_module_loading=os.environ.get("CUDA_MODULE_LOADING", "unset (PyTorch's default: LAZY)"),
        pytorch_cuda_alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        method="fresh process per case on cuda:0; torch.cuda.max_memory_allocated/reserved per phase "
               "(peaks reset after each), NVML process used at each phase end",
        units="bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=None, help="cases whose id contains this (repeatable)")
    ap.add_argument("--out", default=os.path.join(HERE, "measured_cuda.json"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker)
    try:
        import torch
    except ImportError:
        sys.exit("validate-gpu: this Python (%s) has no torch" % sys.executable)
    import cases
    import nvml_probe
    sel = [c for c in cases.CASES if a.only is None or any(o in c["id"] for o in a.only)]
    if a.list:
        for c in sel:
            print(c["id"])
        return
    if not sel:
        sys.exit(f"validate-gpu: no case matches {a.only!r}")
    if not torch.cuda.is_available():
        sys.exit(f"validate-gpu: PyTorch {torch.__version__} sees no CUDA device "
                 f"(built with CUDA {torch.version.cuda}); nothing measured")
    nv = nvml_probe.Nvml()
    h = header(nv)
    print(f"{h['gpu_name']} ({h['gpu_memory_bytes']:,} bytes), driver {h['driver_version']}, "
          f"CUDA {h['cuda_version']}, PyTorch {h['torch_version']}: {len(sel)} cases", flush=True)
    results, errors, t_start = [], [], time.time()
    for i, c in enumerate(sel, 1):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", c["id"]],
                           capture_output=True, text=True)
        res = None
        for line in p.stdout.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[len("RESULT "):])
        if p.returncode != 0 or res is None:
            errors.append(dict(id=c["id"], error=(p.stderr or p.stdout)[-2000:]))
            print(f"[{i}/{len(sel)}] ERROR {c['id']}\n{errors[-1]['error']}", flush=True)
            continue
        entry = dict(c)
        if "skipped" in res:
            entry["skipped"] = res["skipped"]
            print(f"[{i}/{len(sel)}] {c['id']}: skipped ({res['skipped'][:60]})", flush=True)
        else:
            entry["measured"] = res["measured"]
            m = res["measured"]
            print(f"[{i}/{len(sel)}] {c['id']}: allocated {m['allocated_peak_bytes']:,} reserved "
                  f"{m['reserved_peak_bytes']:,} device {m['device_total_bytes']}", flush=True)
        results.append(entry)
    h["run_seconds"] = round(time.time() - t_start, 1)
    h["errors"] = [e["id"] for e in errors]
    order = {c["id"]: i for i, c in enumerate(cases.CASES)}
    results.sort(key=lambda e: order[e["id"]])
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(header=h, cases=results), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {sum('measured' in r for r in results)} measured, "
          f"{sum('skipped' in r for r in results)} skipped, {len(errors)} errors")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
