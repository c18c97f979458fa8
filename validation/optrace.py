#!/usr/bin/python3
"""Print the full c10 CPU allocation trace of one case.

    /usr/bin/python3 validation/optrace.py MODEL [--batch N] [--seq N]
        [--mode infer|train] [--optimizer sgd|momentum|adam|adamw]
        [--foreach|--no-foreach] [--dropout off] [--steps 1]
        [--from-phase baseline] [--min-bytes 0] [--full-chain] [--no-modules]

One line per event, in execution order:
    +/-bytes   running_total   above_baseline   phase   module   op
`op` is '[AutogradNode: ]outermost aten op > innermost op' (or the whole op
chain with --full-chain); `module` is the innermost nn.Module whose forward
was running (empty in backward/optimizer).  Phase/module markers are printed
as '== phase' lines.  A summary of per-phase peaks follows.

Python API:  import optrace; for ev in optrace.trace_case(case): ...
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import memtrace  # noqa: E402


def trace_case(case, steps=2, hook_modules=True):
    """Yields dicts: kind ('alloc'|'free'|'phase'), bytes, total, phase, module, op, chain."""
    rec, rp, _ = memtrace.run_case(case, use_shim=False, hook_modules=hook_modules, steps=steps)
    live = {}
    cur = 0
    phase = ""
    mods = []
    mi = 0
    for e in rp.trace:
        if e[0] == "mark":
            name = rec.marks[mi]
            mi += 1
            if name.startswith("P:"):
                phase = name[2:]
                yield dict(kind="phase", phase=phase, total=cur)
            elif name.startswith("M+"):
                mods.append(name[2:])
            elif name.startswith("M-") and mods and mods[-1] == name[2:]:
                mods.pop()
            continue
        _, nb, ptr, _, chain = e
        cur += nb
        if nb > 0:
            live[ptr] = (chain, phase)
            yield dict(kind="alloc", bytes=nb, total=cur, phase=phase, module=mods[-1] if mods else "",
                       op=memtrace.op_label(chain), chain=memtrace.full_label(chain))
        else:
            achain, aphase = live.pop(ptr)
            yield dict(kind="free", bytes=nb, total=cur, phase=phase, module=mods[-1] if mods else "",
                       op=memtrace.op_label(chain), chain=memtrace.full_label(chain),
                       allocated_by=memtrace.op_label(achain), allocated_in=aphase)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--mode", choices=["infer", "train"], default="train")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adamw"], default="sgd")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--foreach", dest="foreach", action="store_true", default=False)
    g.add_argument("--no-foreach", dest="foreach", action="store_false")
    ap.add_argument("--dropout", choices=["on", "off"], default="on")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--from-phase", default=None, help="start printing at this phase (e.g. step2:forward)")
    ap.add_argument("--min-bytes", type=int, default=0, help="hide alloc/free events smaller than this")
    ap.add_argument("--full-chain", action="store_true")
    ap.add_argument("--no-modules", action="store_true")
    a = ap.parse_args(argv)
    import models
    seq = a.seq if a.seq is not None else models.default_seq(a.model)
    case = dict(model=a.model, batch=a.batch, seq=seq, mode=a.mode,
                optimizer=a.optimizer if a.mode == "train" else None,
                foreach=a.foreach if a.mode == "train" else None, dropout=a.dropout == "on")
    printing = a.from_phase is None
    base = 0
    peaks = {}
    out = sys.stdout
    for ev in trace_case(case, steps=a.steps, hook_modules=not a.no_modules):
        if ev["kind"] == "phase":
            if ev["phase"] == "baseline" or (ev["phase"].startswith("infer") and base == 0):
                base = ev["total"]
            if ev["phase"] == "infer:forward" or ev["phase"].startswith("step"):
                pass
            if a.from_phase is not None and ev["phase"] == a.from_phase:
                printing = True
            peaks.setdefault(ev["phase"], ev["total"])
            if printing:
                out.write(f"== {ev['phase']}  (live {ev['total']})\n")
            continue
        ph = ev["phase"]
        peaks[ph] = max(peaks.get(ph, 0), ev["total"])
        if not printing or abs(ev["bytes"]) < a.min_bytes:
            continue
        op = ev["chain"] if a.full_chain else ev["op"]
        extra = f"   [allocated by {ev['allocated_by']} in {ev['allocated_in']}]" if ev["kind"] == "free" else ""
        out.write(f"{ev['bytes']:+14d} {ev['total']:14d} {ev['total'] - base:+14d}  {ph:16s} {ev['module'][:40]:40s} {op}{extra}\n")
    out.write("\n# peak live bytes per phase (absolute / above baseline %d)\n" % base)
    for ph, v in peaks.items():
        out.write(f"#   {ph:18s} {v:14d} {v - base:+14d}\n")


if __name__ == "__main__":
    main()
