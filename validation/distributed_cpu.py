#!/usr/bin/python3
"""Measure one data-parallel rank on the CPU: PyTorch 1.13 DistributedDataParallel over gloo,
2 processes (torch.multiprocessing), each rank's live CPU tensor bytes recorded with memtrace's
profiler replay, and compared with headroom's per-rank prediction
(`headroom estimate MODEL --device cpu --gpus 2 ...`).

    nice -n 10 /usr/bin/python3 validation/distributed_cpu.py [--model mlp:layers=4,dim=512]
        [--batch 8] [--seq N] [--optimizer adam] [--headroom build/release/headroom] [--json]
        [--record validation/measured_distributed.json]

--record adds (or replaces) the case's measured peaks in that file, which
tests/distributed_validation_test.cc compares with headroom's prediction.

What one machine cannot check, and why (docs/distributed.md): FSDP in 1.13 refuses CPU-only
execution (_lazy_init: "FSDP does not support CPU only execution"; with Debian's Python 3.11,
torch.distributed.fsdp does not even import), and DeepSpeed is not installed (nor packaged in
Debian); their per-rank numbers follow the engines' source only.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, case, out_dir):
    import gc
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import memtrace
    import models

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    gc.collect()
    rec = memtrace.Recorder(use_shim=False)
    with rec:
        model, x, y, loss_fn = models.build(case["model"], case["batch"], case.get("seq"), dropout=case.get("dropout", True))
        model.train(True)
        # gloo cannot broadcast bool buffers (GPT-2's causal mask): DDP is told to leave them out
        # of its start-up broadcast; they are not trained, so nothing else changes.
        skip = [n for n, b in model.named_buffers() if not (b.is_floating_point() or b.is_complex())]
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, skip)
        # DDP's defaults: bucket_cap_mb 25 (the first bucket 1 MiB), gradient_as_bucket_view False.
        ddp = DistributedDataParallel(model)
        opt = memtrace.make_optimizer(case["optimizer"], ddp.parameters(), case["foreach"])
        gc.collect()
        gc.disable()
        try:
            rec.mark("P:baseline")
            for s in (1, 2):
                rec.mark(f"P:step{s}:forward")
                out = ddp(x)
                loss = loss_fn(out, y)
                rec.mark(f"P:step{s}:backward")
                loss.backward()
                del out, loss
                rec.mark(f"P:step{s}:optimizer")
                opt.step()
                opt.zero_grad(set_to_none=True)
            rec.mark("P:end")
        finally:
            gc.enable()
    rp = memtrace.Replay(rec.trace, rec.marks)
    measured = memtrace.analyze(case, rec, rp)
    grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(dict(peak_bytes=measured["peak_bytes"], baseline_bytes=measured["baseline_bytes"],
                       peak_phase=measured["peak_phase"], peak_step=measured["peak_step"],
                       gradient_bytes=grads), f)
    dist.destroy_process_group()


def case_id(case, world):
    seq = f"/s{case['seq']}" if case.get("seq") else ""
    return f"{case['model']}/ddp{world}/b{case['batch']}{seq}/{case['optimizer']}/{'foreach' if case['foreach'] else 'no-foreach'}"


def record(path, case, world, ranks):
    doc = json.load(open(path)) if os.path.exists(path) else {"cases": []}
    cid = case_id(case, world)
    doc["cases"] = [c for c in doc["cases"] if c["id"] != cid]
    doc["cases"].append(dict(id=cid, model=case["model"], batch=case["batch"], seq=case.get("seq"), optimizer=case["optimizer"],
                             foreach=case["foreach"], world_size=world,
                             measured=[dict(rank=i, peak_bytes=r["peak_bytes"], peak_phase=r["peak_phase"],
                                            peak_step=r["peak_step"], gradient_bytes=r["gradient_bytes"])
                                       for i, r in enumerate(ranks)]))
    doc["cases"].sort(key=lambda c: c["id"])
    doc["how"] = ("validation/distributed_cpu.py: PyTorch 1.13 DistributedDataParallel over gloo, one CPU process per rank, "
                  "live CPU tensor bytes by memtrace.py's profiler replay")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def predict(headroom, case, gpus):
    cmd = [headroom, "estimate", case["model"], "--batch", str(case["batch"]), "--device", "cpu", "--gpus", str(gpus),
           "--optimizer", case["optimizer"], "--foreach" if case["foreach"] else "--no-foreach", "--json"]
    if case.get("seq"):
        cmd += ["--seq", str(case["seq"])]
    if not case.get("dropout", True):
        cmd += ["--dropout", "off"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp:layers=4,dim=512")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--foreach", action="store_true")
    ap.add_argument("--headroom", default="build/release/headroom")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--record", default=None, help="add the measurement to this JSON file")
    a = ap.parse_args()
    case = dict(model=a.model, batch=a.batch, seq=a.seq, mode="train", optimizer=a.optimizer, foreach=a.foreach, dropout=True)
    world = 2
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(world, free_port(), case, d), nprocs=world, join=True)
        ranks = [json.load(open(os.path.join(d, f"rank{r}.json"))) for r in range(world)]
    e = predict(a.headroom, case, world)
    result = dict(case=case, world_size=world, ranks=ranks, predicted_peak_bytes=e["peak_bytes"],
                  predicted_layout=e["per_gpu"]["layout"]["description"])
    for r in ranks:
        r["error"] = (e["peak_bytes"] - r["peak_bytes"]) / r["peak_bytes"]
    if a.record:
        record(a.record, case, world, ranks)
    if a.json:
        print(json.dumps(result, indent=1, sort_keys=True))
        return
    print(f"{a.model} batch {a.batch}, {a.optimizer}, DDP over gloo, {world} CPU processes")
    for i, r in enumerate(ranks):
        print(f"  rank {i}: measured peak {r['peak_bytes']:,} bytes (step {r['peak_step']} {r['peak_phase']}), "
              f"predicted {e['peak_bytes']:,} ({100 * r['error']:+.4f}%); gradients {r['gradient_bytes']:,}")


if __name__ == "__main__":
    main()
