#!/usr/bin/python3
"""Probes of single CUDA calls, for the rules that validation cases alone leave open (docs/gpu.md).

    python3 validation/cuda_probe.py --out validation/measured_cuda_probe.json [--section S]...

Sections, each in its own process on cuda:0:
- conv: a sweep of convolution geometries (channels, kernel, stride, padding, spatial size, batch,
  groups, dtype). For each: the forward under no_grad, the forward with grad, and the backward for
  the input, the weight, and both (aten.convolution_backward with each output mask), each call
  measured alone: the allocations it made that it freed before returning (the borrowed workspaces:
  the sizes, in order, from the allocator trace) and what it kept (its outputs).
- context: NVML's used memory of the process after each first use of a library or kernel family
  (cuBLAS matmul, addmm with a bias (cuBLASLt), bf16 matmul, cuDNN convolution, batch norm,
  pooling, elementwise ops, a backward on the autograd thread, SDPA), with the allocator events each
  step made.
- lt: when the cuBLASLt workspace is created: addmm with and without bias, 3-d inputs, fp32/bf16,
  the backward thread.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _trace_since(torch, n0):
    tr = torch.cuda.memory._snapshot()["device_traces"][0]
    out = [(e["action"], e["size"]) for e in tr[n0:] if e["action"] in ("alloc", "free_completed",
                                                                       "segment_alloc", "segment_free")]
    return out, len(tr)


def _call_events(torch, fn):
    """Runs fn() and returns (its allocator events, the number of trace entries after it)."""
    n0 = len(torch.cuda.memory._snapshot()["device_traces"][0])
    torch.cuda.synchronize()
    r = fn()
    torch.cuda.synchronize()
    ev, _ = _trace_since(torch, n0)
    return r, ev


def _summarise(ev):
    """Borrowed (allocated and freed within the call) and kept allocation sizes, in order."""
    live, borrowed = [], []
    for a, s in ev:
        if a == "alloc":
            live.append(s)
        elif a == "free_completed":
            if s in live:
                live.remove(s)
                borrowed.append(s)
    return borrowed, live


def section_conv():
    import torch
    torch.backends.cudnn.benchmark = False
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10_000_000)
    dev = torch.device("cuda", 0)
    geoms = []
    for dtype in ("float32", "bfloat16"):
        for (cin, cout, k, s, p, h, g) in [
            (3, 64, 11, 4, 2, 224, 1), (3, 64, 7, 2, 3, 224, 1), (3, 64, 3, 1, 1, 224, 1), (3, 32, 3, 2, 1, 224, 1),
            (3, 768, 16, 16, 0, 224, 1), (3, 32, 3, 2, 0, 299, 1),
            (64, 64, 3, 1, 1, 56, 1), (64, 64, 1, 1, 0, 56, 1), (64, 256, 1, 1, 0, 56, 1), (256, 64, 1, 1, 0, 56, 1),
            (64, 128, 3, 2, 1, 56, 1), (64, 128, 1, 2, 0, 56, 1), (128, 128, 3, 1, 1, 28, 1), (128, 256, 3, 2, 1, 28, 1),
            (256, 256, 3, 1, 1, 14, 1), (256, 512, 3, 2, 1, 14, 1), (512, 512, 3, 1, 1, 7, 1), (512, 512, 3, 1, 1, 14, 1),
            (64, 192, 5, 1, 2, 27, 1), (192, 384, 3, 1, 1, 13, 1), (384, 256, 3, 1, 1, 13, 1),
            (128, 128, 3, 1, 1, 112, 1), (256, 256, 3, 1, 1, 56, 1), (64, 64, 3, 1, 1, 224, 1),
            (32, 32, 3, 1, 1, 112, 32), (96, 96, 3, 2, 1, 112, 96), (144, 144, 3, 1, 1, 56, 144), (960, 960, 3, 1, 1, 7, 960),
            (32, 16, 1, 1, 0, 112, 1), (16, 96, 1, 1, 0, 112, 1), (128, 32, 3, 1, 1, 28, 1), (48, 64, 5, 1, 2, 35, 1),
            (768, 192, 1, 1, 0, 17, 1), (128, 192, 7, 1, 3, 17, 1), (160, 160, 1, 7, 0, 17, 1),
        ]:
            for n in (1, 2, 4, 8):
                geoms.append(dict(dtype=dtype, cin=cin, cout=cout, k=k, stride=s, pad=p, h=h, groups=g, batch=n))
    out = []
    for gm in geoms:
        try:
            dt = getattr(torch, gm["dtype"])
            x = torch.randn(gm["batch"], gm["cin"], gm["h"], gm["h"], device=dev, dtype=dt)
            w = torch.randn(gm["cout"], gm["cin"] // gm["groups"], gm["k"], gm["k"], device=dev, dtype=dt)
            conv = lambda: torch.nn.functional.conv2d(x, w, None, gm["stride"], gm["pad"], 1, gm["groups"])
            with torch.no_grad():
                y, ev_f = _call_events(torch, conv)
            go = torch.randn_like(y)
            rec = dict(gm, out_shape=list(y.shape))
            rec["forward"] = _summarise(ev_f)
            for name, mask in (("bwd_input", [True, False, False]), ("bwd_weight", [False, True, False]),
                               ("bwd_both", [True, True, False])):
                _, ev = _call_events(torch, lambda: torch.ops.aten.convolution_backward(
                    go, x, w, None, [gm["stride"]] * 2, [gm["pad"]] * 2, [1, 1], False, [0, 0], gm["groups"], mask))
                rec[name] = _summarise(ev)
            del x, w, y, go
            out.append(rec)
        except Exception as e:  # one geometry's failure must not lose the sweep
            out.append(dict(gm, error=str(e)[:300]))
    return out


def _nvml_used():
    import nvml_probe
    return nvml_probe.Nvml().process_used()


def section_context():
    import torch
    dev = torch.device("cuda", 0)
    steps = []
    torch.cuda.set_device(dev)
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1_000_000)

    def step(name, fn):
        try:
            _, ev = _call_events(torch, fn)
            steps.append(dict(step=name, nvml_process_used_bytes=_nvml_used(), events=ev,
                              allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved()))
        except Exception as e:
            steps.append(dict(step=name, error=str(e)[:300]))

    keep = {}
    step("init", lambda: None)
    step("empty tensor", lambda: keep.setdefault("a", torch.empty(1024, device=dev)))
    step("elementwise add", lambda: keep.setdefault("b", keep["a"] + 1))
    step("randn", lambda: keep.setdefault("x", torch.randn(64, 256, device=dev)))
    step("mm fp32", lambda: keep.setdefault("mm", keep["x"] @ torch.randn(256, 256, device=dev)))
    step("addmm with bias fp32", lambda: keep.setdefault("lin", torch.nn.functional.linear(
        keep["x"], torch.randn(128, 256, device=dev), torch.randn(128, device=dev))))
    step("bf16 matmul", lambda: keep.setdefault("bf", keep["x"].bfloat16() @ torch.randn(256, 64, device=dev).bfloat16()))
    step("relu", lambda: keep.setdefault("r", torch.relu(keep["x"])))
    step("softmax", lambda: keep.setdefault("sm", torch.softmax(keep["x"], -1)))
    step("layer_norm", lambda: keep.setdefault("ln", torch.nn.functional.layer_norm(keep["x"], (256,))))
    img = torch.randn(2, 64, 56, 56, device=dev)
    step("conv2d", lambda: keep.setdefault("c", torch.nn.functional.conv2d(img, torch.randn(64, 64, 3, 3, device=dev), padding=1)))
    step("batch_norm train", lambda: keep.setdefault("bn", torch.nn.functional.batch_norm(
        img, torch.zeros(64, device=dev), torch.ones(64, device=dev), training=True)))
    step("max_pool2d", lambda: keep.setdefault("mp", torch.nn.functional.max_pool2d(img, 3, 2, 1)))
    step("adaptive_avg_pool2d", lambda: keep.setdefault("ap", torch.nn.functional.adaptive_avg_pool2d(img, 1)))
    q = torch.randn(2, 8, 128, 64, device=dev, dtype=torch.bfloat16)
    step("sdpa bf16", lambda: keep.setdefault("sd", torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)))
    step("sdpa fp32", lambda: keep.setdefault("sd32", torch.nn.functional.scaled_dot_product_attention(
        q.float(), q.float(), q.float(), is_causal=True)))
    lin = torch.nn.Linear(256, 256).to(dev)
    step("linear backward (autograd thread)", lambda: lin(keep["x"].requires_grad_()).sum().backward())
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(dev)
    step("conv backward", lambda: conv(img.requires_grad_()).sum().backward())
    bn = torch.nn.BatchNorm2d(64).to(dev)
    step("batch_norm backward", lambda: bn(img).sum().backward())
    p = [torch.nn.Parameter(torch.randn(1000, device=dev)) for _ in range(4)]
    for t in p:
        t.grad = torch.randn_like(t)
    opt = torch.optim.Adam(p)
    step("adam step foreach", lambda: opt.step())
    step("cross_entropy", lambda: keep.setdefault("ce", torch.nn.functional.cross_entropy(
        torch.randn(8, 10, device=dev, requires_grad=True), torch.zeros(8, dtype=torch.long, device=dev))))
    step("empty_cache", lambda: torch.cuda.empty_cache())
    return steps


def section_lt():
    import torch
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1_000_000)
    steps = []

    def step(name, fn):
        try:
            _, ev = _call_events(torch, fn)
            steps.append(dict(step=name, events=ev))
        except Exception as e:
            steps.append(dict(step=name, error=str(e)[:300]))

    x = torch.randn(8, 64, device=dev)
    w = torch.randn(32, 64, device=dev)
    b = torch.randn(32, device=dev)
    step("linear no bias 2-d fp32", lambda: torch.nn.functional.linear(x, w))
    step("linear bias 2-d fp32", lambda: torch.nn.functional.linear(x, w, b))
    step("linear bias 3-d fp32", lambda: torch.nn.functional.linear(x.view(2, 4, 64), w, b))
    step("linear bias 2-d bf16", lambda: torch.nn.functional.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()))
    step("addmm beta=1 2-d bias", lambda: torch.addmm(torch.randn(8, 32, device=dev), x, w.t()))
    lin = torch.nn.Linear(64, 32).to(dev)
    xr = x.clone().requires_grad_()
    step("linear bias backward", lambda: lin(xr).sum().backward())
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        step("linear bias on a side stream", lambda: torch.nn.functional.linear(x, w, b))
    return steps


SECTIONS = dict(conv=section_conv, context=section_context, lt=section_lt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "measured_cuda_probe.json"))
    ap.add_argument("--section", action="append", default=None, choices=sorted(SECTIONS))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print("RESULT " + json.dumps(SECTIONS[a.worker]()), flush=True)
        return
    import torch
    if not torch.cuda.is_available():
        sys.exit("cuda_probe: PyTorch sees no CUDA device; nothing measured")
    result = dict(header=dict(gpu_name=torch.cuda.get_device_name(0), torch_version=torch.__version__,
                              cuda_version=torch.version.cuda, cudnn_version=torch.backends.cudnn.version(),
                              date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    for name in a.section or sorted(SECTIONS):
        t0 = time.time()
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name], capture_output=True, text=True)
        line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
        result[name] = json.loads(line[len("RESULT "):]) if line else dict(error=(p.stderr or p.stdout)[-3000:])
        print(f"{name}: {'ok' if line else 'ERROR'} in {time.time() - t0:.1f} s", flush=True)
        if not line:
            print(p.stderr[-3000:])
    with open(a.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
