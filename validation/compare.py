#!/usr/bin/python3
"""Compare headroom's predictions with measured.json (the same check as make test's
Validation test, as a quick table for one file or a subset).

    validation/compare.py [--measured validation/measured.json] [--headroom build/release/headroom]
                          [--only SUBSTRING]
"""
import argparse
import json
import subprocess


def flags(c):
    f = [c["model"], "--batch", str(c["batch"]), "--mode", c["mode"], "--device", "cpu", "--json"]
    if c["seq"] is not None:
        f += ["--seq", str(c["seq"])]
    if c["mode"] == "train":
        f += ["--optimizer", c["optimizer"], "--foreach" if c["foreach"] else "--no-foreach"]
    if not c["dropout"]:
        f += ["--dropout", "off"]
    for r in c.get("checkpoint") or []:
        f += ["--checkpoint", r]
    if c.get("checkpoint_impl"):
        f += ["--checkpoint-impl", c["checkpoint_impl"]]
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", default="validation/measured.json")
    ap.add_argument("--headroom", default="build/release/headroom")
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table (docs/accuracy.md)")
    a = ap.parse_args()
    doc = json.load(open(a.measured))
    errs = []
    if a.markdown:
        print("| case | measured peak (bytes) | predicted (bytes) | error | measured phase |")
        print("|---|---:|---:|---:|---|")
    for c in doc["cases"]:
        if a.only not in c["id"]:
            continue
        m = c["measured"]["peak_bytes"]
        p = subprocess.run([a.headroom, "estimate"] + flags(c), capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{c['id']:90s} {m:>14d}  ERROR {p.stderr.strip()}")
            errs.append(1.0)
            continue
        e = json.loads(p.stdout)
        err = (e["peak_bytes"] - m) / m
        errs.append(abs(err))
        if a.markdown:
            print(f"| `{c['id']}` | {m:,} | {e['peak_bytes']:,} | {100 * err:+.4f}% | {c['measured']['peak_phase']} |")
            continue
        print(f"{c['id']:90s} {m:>14d} {e['peak_bytes']:>14d} {100 * err:+9.4f}%  "
              f"measured {c['measured']['peak_phase']}, predicted {e['peak_phase']} {e['peak_op']}")
    if errs:
        s = sorted(errs)
        exact = sum(1 for e in errs if e == 0)
        if a.markdown:
            print(f"\n{len(s)} cases; {exact} exact to the byte; median |error| {100 * s[len(s) // 2]:.4f}%; worst {100 * s[-1]:.4f}%.")
            return
        print(f"{len(s)} cases, median |error| {100 * s[len(s) // 2]:.4f}%, worst {100 * s[-1]:.4f}%")


if __name__ == "__main__":
    main()
