#!/usr/bin/python3
"""Run the headroom validation measurements.

    /usr/bin/python3 validation/run.py [--only SUBSTRING] [--out validation/measured.json]
                                       [--jobs 2] [--fresh] [--list]

1. builds the LD_PRELOAD shim (make -C validation),
2. runs proof.py (hand-computed exactness checks) -- aborts if any check fails,
3. runs every case of cases.py whose id contains SUBSTRING, each in its own
   fresh /usr/bin/python3 process with the shim preloaded (a fresh process is
   required: the profiler's CPU memory reporter keeps state across sessions),
   up to --jobs at a time (each process uses torch's default thread count),
4. writes --out with sorted keys and the stable case order of cases.py.  With
   --only, results are merged into an existing --out (other cases are kept)
   unless --fresh is given.
"""
import argparse
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

PY = "/usr/bin/python3"
SHIM = os.path.join(HERE, "build", "liballoc_counter.so")

METHOD = ("torch.profiler(profile_memory=True) [memory] events of the c10 CPU allocator, replayed in "
          "execution order from the profiler event tree (exact requested bytes, checked against the "
          "allocator's running total after every event); cross-check: LD_PRELOAD shim alloc_counter.c "
          "counting posix_memalign calls made from libc10.so")


def case_list(suite):
    """The cases of a suite: the built-in models (cases.py) or captured modules (captured.py)."""
    if suite == "captured":
        import captured
        return captured.CASES
    if suite == "detection":
        import detection
        return detection.CASES
    import cases
    return cases.CASES


def worker(case_id, suite="builtin"):
    """Runs one case in this process and prints 'RESULT <json>'."""
    import torch
    import torchvision

    import cases
    import memtrace
    c = next(c for c in case_list(suite) if c["id"] == case_id)
    t0 = time.time()
    rec, rp, info = memtrace.run_case(c)
    m = memtrace.analyze(c, rec, rp)
    env = dict(torch=torch.__version__, torchvision=torchvision.__version__,
               threads=torch.get_num_threads(), interop_threads=torch.get_num_interop_threads(),
               shim=rec.shim is not None)
    out = dict(case=c, measured=m, env=env,
               timing=dict(build_seconds=info["build_seconds"], run_seconds=info["run_seconds"],
                           total_seconds=round(time.time() - t0, 2)))
    print("RESULT " + json.dumps(out, sort_keys=True), flush=True)


def _env():
    e = dict(os.environ)
    e["LD_PRELOAD"] = SHIM
    e["PYTHONHASHSEED"] = "0"
    return e


def build_shim():
    subprocess.run(["make", "-s", "-C", HERE], check=True)
    if not os.path.exists(SHIM):
        raise SystemExit("shim build failed")


def run_proof():
    p = subprocess.run([PY, os.path.join(HERE, "proof.py"), "--json"], env=_env(),
                       capture_output=True, text=True)
    sys.stdout.write("".join(l + "\n" for l in p.stdout.splitlines() if l.startswith(("PASS", "FAIL", "PROOF OK", "PROOF FAILED"))))
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("PROOF_JSON "):
            res = json.loads(line[len("PROOF_JSON "):])
    if p.returncode != 0 or res is None or not res.get("passed"):
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit("EXACTNESS PROOF FAILED -- refusing to measure (see output above)")
    return res


def run_one(c, suite="builtin"):
    t0 = time.time()
    p = subprocess.run([PY, os.path.abspath(__file__), "--worker", c["id"], "--suite", suite], env=_env(),
                       capture_output=True, text=True)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
    if p.returncode != 0 or res is None:
        return dict(case=c, error=(p.stderr or p.stdout)[-3000:], wall=time.time() - t0)
    res["wall"] = round(time.time() - t0, 2)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=None,
                    help="run cases whose id contains this substring (repeatable: any of them)")
    ap.add_argument("--suite", choices=("builtin", "captured", "detection"), default="builtin",
                    help="builtin (cases.py -> measured.json), captured modules (captured.py -> captured.json) "
                         "or detection models (detection.py -> detection.json)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="with --only: do not merge into existing --out")
    ap.add_argument("--list", action="store_true", help="list case ids and exit")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--skip-proof", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.suite)
    if a.out is None:
        a.out = os.path.join(HERE, {"captured": "captured.json", "detection": "detection.json"}.get(a.suite, "measured.json"))
    all_cases = case_list(a.suite)

    import cases
    sel = [c for c in all_cases if a.only is None or any(o in c["id"] for o in a.only)]
    if a.list:
        for c in sel:
            print(c["id"])
        return
    if not sel:
        raise SystemExit(f"no case matches {a.only!r}")

    t_start = time.time()
    build_shim()
    proof = None if a.skip_proof else run_proof()

    # scheduler: up to --jobs processes, RAM budget in GiB
    budget = [20]
    lock = threading.Condition()
    results = {}
    queue = list(sel)
    # longest first (by the previous run's timings if any, else by RAM class),
    # so that the tail of the run is short
    tpath = os.path.join(HERE, "build", "timings.json")
    prev_t = {}
    if os.path.exists(tpath):
        with open(tpath) as f:
            prev_t = json.load(f)
    # (a case never timed counts as 60 s)
    queue.sort(key=lambda c: (-prev_t.get(c["id"], {}).get("wall", 60.0), -cases.heavy_gb(c)))

    def take():
        with lock:
            while True:
                if not queue:
                    return None
                for i, c in enumerate(queue):
                    if cases.heavy_gb(c) <= budget[0]:
                        budget[0] -= cases.heavy_gb(c)
                        return queue.pop(i)
                lock.wait()

    def loop():
        while True:
            c = take()
            if c is None:
                return
            r = run_one(c, a.suite)
            with lock:
                budget[0] += cases.heavy_gb(c)
                results[c["id"]] = r
                n = len(results)
                lock.notify_all()
            if "error" in r:
                print(f"[{n}/{len(sel)}] ERROR {c['id']}:\n{r['error']}", flush=True)
            else:
                m = r["measured"]
                print(f"[{n}/{len(sel)}] {c['id']}: peak {m['peak_bytes']:,} ({m['peak_phase']}) "
                      f"base {m['baseline_bytes']:,} shim diff {m['crosscheck'].get('diff_bytes')} "
                      f"{r['wall']:.1f}s", flush=True)

    threads = [threading.Thread(target=loop) for _ in range(max(1, a.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t_start

    # ---- assemble output ----------------------------------------------
    old = {}
    if a.only is not None and not a.fresh and os.path.exists(a.out):
        with open(a.out) as f:
            prev = json.load(f)
        old = {c["id"]: c for c in prev.get("cases", [])}
    entries = dict(old)
    env = None
    timings = {}
    errors = []
    for cid, r in results.items():
        if "error" in r:
            errors.append(cid)
            continue
        env = env or r["env"]
        e = dict(r["case"])
        e["measured"] = r["measured"]
        entries[cid] = e
        timings[cid] = dict(r["timing"], wall=r["wall"])
    order = {c["id"]: i for i, c in enumerate(all_cases)}
    ordered = sorted(entries.values(), key=lambda e: order.get(e["id"], 1 << 30))
    import torch
    import torchvision
    header = dict(
        torch_version=torch.__version__, torchvision_version=torchvision.__version__,
        threads=(env or {}).get("threads"), interop_threads=(env or {}).get("interop_threads"),
        python=platform.python_version(), machine=platform.machine(), cpus=os.cpu_count(),
        method=METHOD, crosscheck="ld_preload_shim (validation/alloc_counter.c)",
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        jobs=a.jobs, run_seconds=round(wall, 1), cases_in_this_run=len(results), errors=errors,
        proof=None if proof is None else dict(passed=proof["passed"], checks=proof["checks"]),
        method_probes=None if proof is None else proof["probes"],
        units="bytes of live c10 CPU tensor storage (requested sizes)")
    if a.only is not None and old:
        header["note"] = f"merged run: this invocation re-measured cases matching {a.only!r}"
    doc = dict(header=header, cases=ordered)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.makedirs(os.path.join(HERE, "build"), exist_ok=True)
    tpath = os.path.join(HERE, "build", "timings.json")
    prev_t = {}
    if os.path.exists(tpath):  # keep timings of cases not run now (scheduling hints)
        with open(tpath) as f:
            prev_t = json.load(f)
    prev_t.update(timings)
    with open(tpath, "w") as f:
        json.dump(prev_t, f, indent=1, sort_keys=True)
    print(f"wrote {a.out}: {len(ordered)} cases ({len(results)} measured now, {len(errors)} errors) "
          f"in {wall:.0f}s")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
