#!/usr/bin/python3
"""Measure the validation cases on the visible CUDA GPU (make validate-gpu; docs/gpu.md).

    python3 validation/cuda_run.py [--only SUBSTRING]... [--out validation/measured_cuda.json] [--list]
                                   [--jobs N] [--trace-dir DIR]

Every case of cases.py (the CPU harness's cases, the same models.py modules) runs in its own fresh
Python process on GPU 0, with the training loop of memtrace.run_case (two steps, zero_grad with
set_to_none=True). Around each phase (baseline, forward, backward, optimizer; inference: forward)
the worker synchronizes and records torch.cuda.max_memory_allocated / max_memory_reserved (then
resets the peaks), memory_allocated / memory_reserved, and what NVML reports as used by the
process and by the device. A case that runs out of memory is recorded as skipped (it does not fit
this GPU). `--jobs N` runs N case processes at once: each peak is the
process's own (the caching allocator's counters and NVML's per-process number), so only the
wall time changes; a case that runs out of memory beside others is measured again alone
afterwards. `--trace-dir DIR` also writes each case's allocator trace (alloc, free and segment
events from torch.cuda.memory._record_memory_history, PyTorch >= 2.1) to DIR/<n>.json, where n is
the case's index in cases.py, to set beside headroom's own events when a case misses. The header names the GPU, its memory, the driver, CUDA, cuDNN and PyTorch versions and
CUDA_MODULE_LOADING. Works with PyTorch 1.13 to 2.x. Without CUDA: one line on stderr, exit 1.

The comparison (tests/cuda_validation_test.cc, run by make test when the file exists): headroom's
allocated peak within 1%, reserved peak within 3%, device total within 5% of what is measured here.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PHASES = ("forward", "backward", "optimizer")


def _is_oom(e):
    return "out of memory" in str(e).lower()


TRACE_ACTIONS = {"alloc": "a", "free_completed": "f", "segment_alloc": "S", "segment_free": "F", "oom": "O"}


def compact_trace(snapshot, marks_us):
    """The allocator trace of device 0 as [code, addr, size, time_us since the first event]
    (free_requested is dropped: on one stream free_completed follows it at once), and each
    phase mark's wall time on the same clock."""
    trace = snapshot.get("device_traces", [[]])
    trace = trace[0] if trace else []
    t0 = trace[0].get("time_us", 0) if trace else 0
    events = []
    for e in trace:
        code = TRACE_ACTIONS.get(e.get("action"))
        if code is None:
            continue
        ev = [code, e.get("addr", 0), e.get("size", 0), e.get("time_us", 0) - t0]
        if e.get("stream", 0):
            ev.append(e["stream"])
        events.append(ev)
    return dict(t0_us=t0, marks=[[n, t - t0] for n, t in marks_us], events=events)


def run_worker(script, case_id, trace_path=None):
    """Runs `script --worker case_id [--trace trace_path]` in a fresh Python process.
    Returns (the finished process, the parsed 'RESULT <json>' line or None)."""
    cmd = [sys.executable, os.path.abspath(script), "--worker", case_id]
    if trace_path:
        cmd += ["--trace", trace_path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
    return p, res


def worker(case_id, trace_path=None):
    """Runs one case on cuda:0 in this process and prints 'RESULT <json>'."""
    import gc

    import torch

    import cases
    import memtrace
    import models
    import nvml_probe
    c = next(c for c in cases.CASES + cases.HOLDOUT if c["id"] == case_id)
    precision = c.get("precision", "fp32")
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
        marks_us.append((name, time.time_ns() // 1000))

    # The CUDA context alone: cudaDeviceSynchronize creates the primary context, no allocation yet.
    torch.cuda.set_device(dev)
    torch.cuda.synchronize(dev)
    context = dict(nvml_process_used_bytes=nv.process_used(), nvml_device_used_bytes=nv.device_used())
    marks_us = []
    if trace_path:
        # No stacks: the recorder then keeps only the events, on the host.
        try:
            torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                     max_entries=2_000_000)
        except (TypeError, AttributeError, RuntimeError) as e:  # PyTorch < 2.1
            print(f"no allocator trace: {e}", file=sys.stderr)
            trace_path = None
    t0 = time.time()
    try:
        torch.manual_seed(0)
        model, x, y, loss_fn = models.build(c["model"], c["batch"], c.get("seq"), dropout=c.get("dropout", True),
                                            checkpoint=c.get("checkpoint_scheme"))
        train = c["mode"] == "train"
        if not train:
            del y
        if precision == "bf16":  # headroom's bf16: the model converted with .to(torch.bfloat16),
            model.to(torch.bfloat16)  # here on the host, so no fp32 copy is ever cached on the device
            if x.is_floating_point():
                x = x.to(torch.bfloat16)
            if train and y.is_floating_point():
                y = y.to(torch.bfloat16)
        # Parameters and buffers move one tensor at a time: one allocation each, as when a model
        # is built on the device (headroom's weights are allocated first, in parameter order).
        model.to(dev)
        loss_fn.to(dev)
        x = x.to(dev)
        if train:
            y = y.to(dev)
        # amp-bf16: the forward and the loss under torch.autocast, whose cast cache is cleared
        # when the context exits (headroom: docs/memory-model.md "Precision"); no GradScaler.
        autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if precision == "amp-bf16" else None
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
                if autocast:
                    with autocast():
                        out = model(x)
                        loss = loss_fn(out, y)
                else:
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
    if trace_path:
        trace = compact_trace(torch.cuda.memory._snapshot(), marks_us)
        trace["id"] = case_id
        with open(trace_path, "w") as f:
            json.dump(trace, f, separators=(",", ":"))
        measured["trace_events"] = len(trace["events"])
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
    ap.add_argument("--suite", choices=("main", "holdout"), default="main",
                    help="main: cases.CASES -> measured_cuda.json; holdout: cases.HOLDOUT -> measured_cuda_holdout.json")
    ap.add_argument("--out", default=None)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="case processes at once (default 1)")
    ap.add_argument("--trace-dir", default=None, help="write each case's allocator trace here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--trace", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.trace)
    if a.jobs < 1:
        sys.exit(f"validate-gpu: --jobs must be at least 1, not {a.jobs}")
    try:
        import torch
    except ImportError:
        sys.exit("validate-gpu: this Python (%s) has no torch" % sys.executable)
    import cases
    import nvml_probe
    suite = cases.HOLDOUT if a.suite == "holdout" else cases.CASES
    if a.out is None:
        a.out = os.path.join(HERE, "measured_cuda_holdout.json" if a.suite == "holdout" else "measured_cuda.json")
    sel = [c for c in suite if a.only is None or any(o in c["id"] for o in a.only)]
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
    h["jobs"] = a.jobs
    if a.trace_dir:
        os.makedirs(a.trace_dir, exist_ok=True)
    index = {c["id"]: i for i, c in enumerate(suite)}
    prefix = "h" if a.suite == "holdout" else ""

    def run_one(c):
        trace = os.path.join(a.trace_dir, f"{prefix}{index[c['id']]}.json") if a.trace_dir else None
        return (c,) + run_worker(__file__, c["id"], trace)

    results, errors, t_start, done = [], [], time.time(), [0]
    lock = threading.Lock()
    alone = []

    def record(c, p, res, retry_oom):
        with lock:
            done[0] += 1
            n = f"[{done[0]}/{len(sel)}]"
            if p.returncode != 0 or res is None:
                errors.append(dict(id=c["id"], error=(p.stderr or p.stdout)[-2000:]))
                print(f"{n} ERROR {c['id']}\n{errors[-1]['error']}", flush=True)
                return
            if "skipped" in res and retry_oom:
                done[0] -= 1
                alone.append(c)
                print(f"{n} {c['id']}: out of memory beside other cases, measured again alone later", flush=True)
                return
            entry = dict(c)
            if "skipped" in res:
                entry["skipped"] = res["skipped"]
                print(f"{n} {c['id']}: skipped ({res['skipped'][:60]})", flush=True)
            else:
                entry["measured"] = res["measured"]
                m = res["measured"]
                print(f"{n} {c['id']}: allocated {m['allocated_peak_bytes']:,} reserved "
                      f"{m['reserved_peak_bytes']:,} device {m['device_total_bytes']}", flush=True)
            results.append(entry)
            with open(a.out + ".partial", "a") as f:  # what survives if the run is cut off
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for c, p, res in pool.map(run_one, sel):
            record(c, p, res, retry_oom=a.jobs > 1)
    for c in alone:
        record(*run_one(c), retry_oom=False)
    h["run_seconds"] = round(time.time() - t_start, 1)
    h["errors"] = [e["id"] for e in errors]
    h["suite"] = a.suite
    order = {c["id"]: i for i, c in enumerate(suite)}
    results.sort(key=lambda e: order[e["id"]])
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(header=h, cases=results), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, a.out)
    if os.path.exists(a.out + ".partial"):
        os.remove(a.out + ".partial")
    print(f"wrote {a.out}: {sum('measured' in r for r in results)} measured, "
          f"{sum('skipped' in r for r in results)} skipped, {len(errors)} errors")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
