#!/usr/bin/python3
"""Predictions through capture against validation/captured.json (python/tests/test_validation.py
checks the same numbers), as a table.

    PYTHONPATH=build/release/python validation/compare_captured.py [--markdown]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import captured  # noqa: E402


def rows(path=os.path.join(HERE, "captured.json")):
    """(case id, measured peak, predicted peak, relative error, measured phase, predicted phase)."""
    out = []
    for c in json.load(open(path))["cases"]:
        m = c["measured"]["peak_bytes"]
        e = captured.predict(c)
        out.append((c["id"], m, e["peak_bytes"], (e["peak_bytes"] - m) / m, c["measured"]["peak_phase"],
                    e["peak_phase"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    r = rows()
    if a.markdown:
        print("| case | measured peak (bytes) | predicted (bytes) | error | measured phase |")
        print("|---|---:|---:|---:|---|")
    for cid, m, p, err, mph, pph in r:
        if a.markdown:
            print(f"| `{cid}` | {m:,} | {p:,} | {100 * err:+.4f}% | {mph} |")
        else:
            print(f"{cid:60s} {m:>12d} {p:>12d} {100 * err:+9.4f}%  measured {mph}, predicted {pph}")
    errs = sorted(abs(x[3]) for x in r)
    exact = sum(1 for e in errs if e == 0)
    print(f"\n{len(errs)} cases; {exact} exact to the byte; median |error| {100 * errs[len(errs) // 2]:.4f}%; "
          f"worst {100 * errs[-1]:.4f}%.")


if __name__ == "__main__":
    main()
