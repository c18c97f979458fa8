#!/usr/bin/python3
"""Every cuDNN convolution call's workspace in the measured CUDA allocator traces, by geometry.

    validation/cuda_conv_workspaces.py [--traces DIR] [--cases 19-106] > validation/cuda_conv_workspaces.json

The traces (validation/cuda_traces.tar.xz, `tar -xJf ... -C /tmp`) carry sizes and addresses but
no op names. This script rebuilds each case's model (models.py, torch on the CPU) and records the
aten calls of its forward and backward (TorchDispatchMode: each call's new output storages in
order), aligns those outputs with the trace's allocations of the same phase (difflib on sizes),
and reads each convolution's workspace off what lies between its outputs: an allocation the
trace frees before anything else is allocated (PyTorch's run_conv_plan borrows
plan.getWorkspaceSize() and returns it when the call ends; aten/src/ATen/native/cudnn/Conv_v8.cpp).
Backward: convolution_backward allocates grad_input, borrows the backward-data workspace, then
grad_weight and the backward-filter workspace, then grad_bias (ConvShared.cpp).

Output: one JSON object per distinct (model, pass, geometry), sorted, with the operand sizes
(fp32) and the measured workspace in bytes; tests/cudnn_workspace_test.cc scores the cudnn9 rule
(src/training/cudnn_workspace.h) on it, per model. Step 1 of each training case is used (step 2
measures the same sizes). Only unambiguous alignments are kept (every output of the call found).
"""
import argparse
import difflib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import models  # noqa: E402


class Recorder(TorchDispatchMode):
    """Each aten call: its name, the byte sizes of the new storages it returns, conv arguments."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        seen = set()
        for a in list(args) + list(kwargs.values()):
            for t in (a if isinstance(a, (list, tuple)) else [a]):
                if isinstance(t, torch.Tensor):
                    seen.add(t.storage().data_ptr())
        new = []
        for t in (out if isinstance(out, (list, tuple)) else [out]):
            if isinstance(t, torch.Tensor) and t.numel() > 0 and t.storage().data_ptr() not in seen:
                seen.add(t.storage().data_ptr())
                new.append(t.storage().nbytes())
        name = str(func)
        conv = None
        if name.startswith("aten.convolution_backward"):
            x, w = args[1], args[2]
            conv = dict(x=list(x.shape), w=list(w.shape), stride=list(args[4]), pad=list(args[5]),
                        groups=args[9], mask=list(args[10]))
        elif name.startswith("aten.convolution"):
            x, w = args[0], args[1]
            conv = dict(x=list(x.shape), w=list(w.shape), stride=list(args[3]), pad=list(args[4]),
                        groups=args[8], transposed=bool(args[6]))
        self.ops.append((name, new, conv))
        return out


def record(case):
    torch.manual_seed(0)
    model, inputs, targets, loss_fn = models.build(case["model"], case["batch"], case.get("seq"),
                                                   case.get("dropout", True))
    train = case["mode"] == "train"
    model.train(train)
    rec = Recorder()
    if not train:
        with torch.no_grad(), rec:
            model(inputs)
        return {"infer:forward": rec.ops}
    with rec:
        out = model(inputs)
    fwd, rec.ops = rec.ops, []
    loss = loss_fn(out, targets)
    with rec:
        loss.backward()
    return {"step1:forward": fwd, "step1:backward": rec.ops}


def phase_events(trace, mark):
    marks = trace["marks"]
    out = []
    for code, addr, size, t, *_ in trace["events"]:
        k = next((i for i, (_, mt) in enumerate(marks) if t <= mt), len(marks) - 1)
        if marks[k][0] == mark and code in ("a", "f"):
            out.append((code, addr, size))
    return out


def conv_workspaces(ops, events):
    """-> [(conv args, [(kind, bytes)...])]: for each conv call, its outputs and borrowed blocks."""
    allocs = [i for i, e in enumerate(events) if e[0] == "a"]
    expected = [(oi, k, nb) for oi, (_, new, _) in enumerate(ops) for k, nb in enumerate(new)]
    sm = difflib.SequenceMatcher(a=[x[2] for x in expected], b=[events[i][2] for i in allocs], autojunk=False)
    owner = {}
    for blk in sm.get_matching_blocks():
        for d in range(blk.size):
            oi, k, _ = expected[blk.a + d]
            owner[allocs[blk.b + d]] = (oi, k)
    where = {}
    for ei, (oi, _) in owner.items():
        where.setdefault(oi, []).append(ei)
    owned = sorted(owner)
    result = []
    for oi, (_, new, conv) in enumerate(ops):
        if conv is None or len(where.get(oi, [])) != len(new):
            continue
        first, last = min(where[oi]), max(where[oi])
        nxt = next((e for e in owned if e > last), len(events))
        seq = []
        for ei in range(first, nxt):
            code, addr, size = events[ei]
            if ei in owner:
                seq.append(("out", owner[ei][1]))
            elif code == "a":
                freed = any(events[j][0] == "f" and events[j][1] == addr for j in range(ei + 1, nxt))
                seq.append(("ws" if freed else "other", size))
        result.append((conv, seq))
    return result


def rows_of(case, ops, events, forward):
    out = []
    for conv, seq in conv_workspaces(ops, events):
        if conv.get("transposed"):
            continue
        n, c, h, w = conv["x"]
        k, _, kh, kw = conv["w"]
        (sh, sw), (ph, pw), g = conv["stride"], conv["pad"], conv["groups"]
        ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        geo = dict(model=case["model"], batch=n, in_channels=c, out_channels=k, height=h, width=w,
                   kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw, groups=g,
                   input_bytes=n * c * h * w * 4, output_bytes=n * k * ho * wo * 4,
                   weight_bytes=k * (c // g) * kh * kw * 4)
        if any(kind == "other" for kind, _ in seq):
            continue  # something else allocated inside the call: not a clean reading
        if forward:
            ws = [v for kind, v in seq if kind == "ws"]
            out.append(dict(geo, call="forward", workspace=ws[0] if ws else 0))
            continue
        mask = conv["mask"]
        grads = [i for i in range(3) if mask[i]]
        per = {}
        current = None
        for kind, v in seq:
            if kind == "out":
                current = grads[v] if v < len(grads) else None
            elif current is not None:
                per.setdefault(current, []).append(v)
        if mask[0]:
            out.append(dict(geo, call="backward_data", workspace=sum(per.get(0, []))))
        if mask[1]:
            out.append(dict(geo, call="backward_filter", workspace=sum(per.get(1, []))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default="/tmp/cuda_traces")
    ap.add_argument("--measured", default=os.path.join(HERE, "measured_cuda.json"))
    ap.add_argument("--cases", default="19-106", help="index range in measured_cuda.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    lo, hi = (int(v) for v in a.cases.split("-"))
    doc = json.load(open(a.measured))
    done, rows = set(), {}
    for i in range(lo, hi + 1):
        case = doc["cases"][i]
        key = (case["model"], case["mode"], case["batch"])
        if case.get("checkpoint") or key in done:
            continue
        done.add(key)
        trace = json.load(open(os.path.join(a.traces, f"{i}.json")))
        assert trace["id"] == case["id"], (trace["id"], case["id"])
        for mark, ops in record(case).items():
            for r in rows_of(case, ops, phase_events(trace, mark), mark.endswith("forward")):
                k = json.dumps({x: v for x, v in r.items() if x != "workspace"}, sort_keys=True)
                rows.setdefault(k, r)
        print(f"case {i} {case['id']}: {len(rows)} calls so far", file=sys.stderr)
    ordered = sorted(rows.values(), key=lambda r: json.dumps(r, sort_keys=True))
    json.dump({"source": "validation/cuda_traces.tar.xz of measured_cuda.json (" +
               doc["header"]["gpu_name"] + ", cuDNN " + str(doc["header"]["cudnn_version"]) + ", torch " +
               doc["header"]["torch_version"] + ")", "calls": ordered}, sys.stdout, indent=0)
    print()


if __name__ == "__main__":
    main()
