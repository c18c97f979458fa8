#!/usr/bin/python3
"""Set a measured CUDA allocator trace beside headroom's own events, phase by phase.

    validation/cuda_trace_diff.py CASE [--traces DIR] [--headroom build/release/headroom] [--context N]
                                  [--generate]

CASE is a case's index in validation/measured_cuda.json or a substring of its id. The measured
trace is DIR/<index>.json (cuda_run.py --trace-dir; validation/cuda_traces.tar.xz holds those of
the committed measured_cuda.json: `tar -xJf validation/cuda_traces.tar.xz -C /tmp` gives
/tmp/cuda_traces; with `--measured validation/measured_cuda_holdout.json`, the traces of
validation/cuda_holdout_traces.tar.xz, in holdout_traces/). headroom's events come from `headroom estimate ... --trace`. Both sides become
signed sizes rounded up to the caching allocator's 512 bytes (+ an allocation, - a free); the
measured events are put in the phase whose mark (cuda_run.py's baseline, stepN:forward, ...) comes
next after them. For each phase: the allocated peak on both sides, then each stretch where the two
sequences differ (difflib), with headroom's op and buffer names for its side.

With --generate, CASE is a case of validation/measured_generate_cuda.json (cuda_generate.py) and
its trace DIR/g<index>.json; the phases are cuda_generate.py's marks (baseline, setup, prefill,
decode1, ...) and headroom's events are put in the phase their op's "prefill." / "decodeN."
prefix names (headroom simulates the prefill, the first and the last decode only).
"""
import argparse
import difflib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^\s*([+-]\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(.*?)\s{2,}(.*?)\s*$")


def round512(n):
    return max(512, (n + 511) // 512 * 512)


def flags(c, gpu):
    f = [c["model"], "--batch", str(c["batch"]), "--mode", c["mode"], "--device", "cuda", "--gpu", gpu, "--trace"]
    if c.get("seq") is not None:
        f += ["--seq", str(c["seq"])]
    if c["mode"] == "train":
        f += ["--optimizer", c["optimizer"], "--foreach" if c["foreach"] else "--no-foreach"]
    if not c.get("dropout", True):
        f += ["--dropout", "off"]
    if c.get("precision", "fp32") != "fp32":
        f += ["--precision", c["precision"]]
    for r in c.get("checkpoint") or []:
        f += ["--checkpoint", r]
    if c.get("checkpoint_impl"):
        f += ["--checkpoint-impl", c["checkpoint_impl"]]
    return f


def generate_flags(c, gpu):
    # A case of measured_generate_cuda.json (cuda_generate.py) as the CLI runs it.
    prec = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[c["dtype"]]
    f = [os.path.join(HERE, "hf-configs", c["config"]), "--mode", "generate", "--batch", str(c["batch"]),
         "--prompt", str(c["prompt"]), "--new-tokens", str(c["new_tokens"]), "--precision", prec,
         "--attention", c["attention"], "--device", "cuda", "--gpu", gpu, "--trace"]
    if c["beams"] > 1:
        f += ["--beams", str(c["beams"])]
    if c["cache"] == "static":
        f += ["--cache", "static"]
    return f


def generate_phase(op, current):
    # headroom names a generate run's ops "prefill.<op>" and "decode<N>.<op>"; the weights and the
    # prompt are cuda_generate.py's baseline, generate()'s own ops before the prefill its setup.
    head = op.split(".", 1)[0]
    if head == "prefill" or (head.startswith("decode") and head[len("decode"):].isdigit()):
        return head
    return current


def headroom_events(binary, c, gpu, generate=False):
    p = subprocess.run([binary, "estimate"] + (generate_flags(c, gpu) if generate else flags(c, gpu)),
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(p.stderr.strip())
    out = []
    current = "setup"
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        delta, _, phase, step, op, name = m.groups()
        d = int(delta)
        if generate:
            current = "baseline" if phase == "setup" else generate_phase(op, current)
            key = current
        else:
            key = "setup" if phase == "setup" else (f"{phase} {step}" if phase != "inference" else "inference")
        out.append((key, (1 if d > 0 else -1) * round512(abs(d)), f"{op} | {name}"))
    return out


def measured_events(trace, generate=False):
    marks = trace["marks"]
    names = []
    for n, _ in marks:
        if generate:
            names.append(n)  # cuda_generate.py: baseline, setup, prefill, decode1, ...
        elif n == "baseline":
            names.append("setup")
        elif n == "infer:forward":
            names.append("inference")
        else:
            s, ph = n.split(":")
            names.append(f"{ph} {s[len('step'):]}")
    out = []
    for code, addr, size, t, *rest in trace["events"]:
        if code not in ("a", "f"):
            continue
        k = next((i for i, (_, mt) in enumerate(marks) if t <= mt), len(marks) - 1)
        out.append((names[k], round512(size) if code == "a" else -round512(size), f"0x{addr:x}"))
    return out


def peak(seq, start=0):
    cur = best = start
    for _, d, _ in seq:
        cur += d
        best = max(best, cur)
    return cur, best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--traces", default="/tmp/cuda_traces")
    ap.add_argument("--measured", default=os.path.join(HERE, "measured_cuda.json"))
    ap.add_argument("--headroom", default=os.path.join(HERE, "..", "build", "release", "headroom"))
    ap.add_argument("--context", type=int, default=3, help="equal events shown around each difference")
    ap.add_argument("--generate", action="store_true",
                    help="CASE is in measured_generate_cuda.json (traces g<index>.json)")
    a = ap.parse_args()
    if a.generate and a.measured == os.path.join(HERE, "measured_cuda.json"):
        a.measured = os.path.join(HERE, "measured_generate_cuda.json")
    doc = json.load(open(a.measured))
    cases = doc["cases"]
    if a.case.isdigit():
        i = int(a.case)
    else:
        hits = [k for k, c in enumerate(cases) if a.case in c["id"]]
        if len(hits) != 1:
            sys.exit(f"{len(hits)} cases match {a.case!r}: " + ", ".join(cases[k]["id"] for k in hits[:8]))
        i = hits[0]
    c = cases[i]
    # cuda_run.py names trace files by the case's index in its suite (cases.CASES, or
    # cases.HOLDOUT with an "h" before it; cuda_generate.py's with a "g"), which is its index here
    # unless a case failed in the harness and is missing from the file (the holdout's bert-base
    # bf16 inference): then the trace is found by its id.
    prefix = "g" if a.generate else ("h" if doc["header"].get("suite") == "holdout" else "")
    path = os.path.join(a.traces, f"{prefix}{i}.json")
    trace = json.load(open(path)) if os.path.exists(path) else {"id": None}
    if trace["id"] != c["id"]:
        for name in sorted(os.listdir(a.traces)):
            if name.startswith(prefix) and name.endswith(".json"):
                t = json.load(open(os.path.join(a.traces, name)))
                if t["id"] == c["id"]:
                    trace = t
                    break
        else:
            sys.exit(f"no trace of {c['id']} in {a.traces}")
    mine = headroom_events(a.headroom, c, doc["header"]["gpu_name"], a.generate)
    real = measured_events(trace, a.generate)
    print(f"case {i}: {c['id']}")
    phases = []
    for _, seq in (("h", mine), ("m", real)):
        for k, _, _ in seq:
            if k not in phases:
                phases.append(k)
    live_h = live_m = 0
    for ph in phases:
        h = [e for e in mine if e[0] == ph]
        m = [e for e in real if e[0] == ph]
        end_h, peak_h = peak(h, live_h)
        end_m, peak_m = peak(m, live_m)
        print(f"\n== {ph}: measured peak {peak_m:,} (end {end_m:,}), headroom peak {peak_h:,} (end {end_h:,}),"
              f" difference {peak_h - peak_m:+,}")
        live_h, live_m = end_h, end_m
        sm = difflib.SequenceMatcher(a=[d for _, d, _ in m], b=[d for _, d, _ in h], autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                continue
            print(f"  -- measured[{i1}:{i2}] vs headroom[{j1}:{j2}] ({tag})")
            for e in m[max(0, i1 - a.context):i1]:
                print(f"     = {e[1]:+14,}")
            for e in m[i1:i2]:
                print(f"     m {e[1]:+14,}  {e[2]}")
            for e in h[j1:j2]:
                print(f"     h {e[1]:+14,}  {e[2]}")


if __name__ == "__main__":
    main()
