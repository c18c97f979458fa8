#!/usr/bin/python3
"""Measures a module trained as is and with a headroom plan applied (plan.apply: checkpointing,
nested regions as nested checkpoint calls),
with the harness of memtrace.py, in this fresh process, and prints one JSON object with the
measured and predicted CPU peaks of both (python/tests/test_apply.py runs it).

    PYTHONPATH=build/release/python /usr/bin/python3 validation/applied.py mlp-seq --budget 30MiB
"""
import argparse
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import memtrace  # noqa: E402


def mlp_seq():
    """A 16-layer ReLU MLP as one nn.Sequential, batch 2048: activations dominate the peak."""
    torch.manual_seed(0)
    layers = [nn.Linear(256, 256)]
    for _ in range(12):
        layers += [nn.ReLU(), nn.Linear(256, 256)]
    layers += [nn.ReLU(), nn.Linear(256, 10)]
    return nn.Sequential(*layers), torch.randn(2048, 256), torch.randint(0, 10, (2048,))


def mlp_deep():
    """A 32-layer ReLU MLP as one nn.Sequential, batch 2048: deep enough for the planner's
    checkpoint strategy to nest regions (Rotor) at tight budgets."""
    torch.manual_seed(0)
    layers = [nn.Linear(256, 256)]
    for _ in range(30):
        layers += [nn.ReLU(), nn.Linear(256, 256)]
    layers += [nn.ReLU(), nn.Linear(256, 10)]
    return nn.Sequential(*layers), torch.randn(2048, 256), torch.randint(0, 10, (2048,))


def resnet18():
    """torchvision's resnet18, batch 8 at 128x128: layerN are Sequentials of BasicBlocks."""
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10), torch.randn(8, 3, 128, 128), torch.randint(0, 10, (8,))


MODELS = {"mlp-seq": mlp_seq, "mlp-deep": mlp_deep, "resnet18": resnet18}


def micro_batches(micro, count):
    """`count` micro-batches of the mlp-seq shapes, each made when asked for (a DataLoader at the
    micro-batch size): only the one in use is held."""
    for _ in range(count):
        yield torch.randn(micro, 256), torch.randint(0, 10, (micro,))


def measure_accumulation(name, budget, strategy="accumulate"):
    """plan.step with the plan's micro-batches (and plan.apply for its checkpointing), against
    the re-simulated peak of what was applied."""
    import headroom
    model, x, y = MODELS[name]()
    loss_fn = lambda out, t: F.cross_entropy(out, t)  # noqa: E731
    plan = headroom.plan(model, x, loss_fn=lambda out: loss_fn(out, y), budget=budget, strategy=strategy,
                         device="cpu", optimizer="sgd", foreach=False)
    # The plan's capture keeps the model and its inputs (plan.apply re-captures at the
    # micro-batch); they were allocated before profiling starts, so they are not counted.
    gc.collect()
    rec = memtrace.Recorder(use_shim=False)
    with rec:
        model = MODELS[name]()[0]
        plan.apply(model)
        opt = memtrace.make_optimizer("sgd", model.parameters(), False)
        gc.collect()
        gc.disable()
        rec.mark("P:baseline")
        for s in (1, 2):
            rec.mark(f"P:step{s}:forward")
            rec.mark(f"P:step{s}:backward")
            rec.mark(f"P:step{s}:optimizer")
            plan.step(model, micro_batches(plan.micro_batch, plan.micro_batches), loss_fn, opt)
        rec.mark("P:end")
        gc.enable()
    rp = memtrace.Replay(rec.trace, rec.marks)
    m = memtrace.analyze(dict(mode="train"), rec, rp)
    return dict(measured=m["peak_bytes"], predicted=plan.applied["estimate"]["peak_bytes"],
                plan_peak=plan["peak_bytes"], checkpoint=plan.applied["checkpoint"],
                micro_batch=plan.micro_batch, micro_batches=plan.micro_batches)


def measure(name, ranges_from_plan, budget, impl="reentrant", regions=None, plan_impl="reentrant"):
    """regions: checkpoint regions ("FIRST..LAST", nested ones after theirs) put in the plan in
    place of the planner's, for plan.apply to realise (nested plans by hand). plan_impl: the
    checkpoint implementation the planner judges its candidates with."""
    import headroom
    model, x, y = MODELS[name]()
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    options = dict(device="cpu", optimizer="sgd", foreach=False)
    plan = None
    if ranges_from_plan:
        if plan_impl != "reentrant":
            options["checkpoint_impl"] = plan_impl
        plan = headroom.plan(model, x, loss_fn=loss_fn, budget=budget, strategy="checkpoint", **options)
        if regions is not None:
            plan["decisions"]["checkpoint_regions"] = regions
        predicted = None
    else:
        predicted = headroom.estimate(model, x, loss_fn=loss_fn, **options)["peak_bytes"]
    del model, x, y
    gc.collect()
    rec = memtrace.Recorder(use_shim=False)
    with rec:
        model, x, y = MODELS[name]()
        if plan is not None:
            plan.apply(model, checkpoint_impl=impl)
            predicted = plan.applied["estimate"]["peak_bytes"]
        opt = memtrace.make_optimizer("sgd", model.parameters(), False)
        gc.collect()
        gc.disable()
        rec.mark("P:baseline")
        for s in (1, 2):
            rec.mark(f"P:step{s}:forward")
            out = model(x)
            loss = F.cross_entropy(out, y)
            rec.mark(f"P:step{s}:backward")
            loss.backward()
            del out, loss
            rec.mark(f"P:step{s}:optimizer")
            opt.step()
            opt.zero_grad(set_to_none=True)
        rec.mark("P:end")
        gc.enable()
    rp = memtrace.Replay(rec.trace, rec.marks)
    m = memtrace.analyze(dict(mode="train"), rec, rp)
    out = dict(measured=m["peak_bytes"], predicted=predicted, phase=m["peak_phase"])
    if plan is not None:
        out.update(plan_peak=plan["peak_bytes"], checkpoint=plan.applied["checkpoint"],
                   planned=plan["decisions"]["checkpoint_regions"], note=plan.get("note"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--budget", default=None, help="plan under this budget and apply it")
    ap.add_argument("--impl", default="reentrant", choices=("reentrant", "non-reentrant"),
                    help="with --budget: the checkpoint implementation plan.apply uses")
    ap.add_argument("--accumulate", default=None, metavar="STRATEGY",
                    help="with --budget: an accumulate or accumulate+checkpoint plan run by plan.step")
    ap.add_argument("--regions", default=None, metavar="R1,R2,...",
                    help="with --budget: apply these checkpoint regions (FIRST..LAST, comma-separated) instead of the plan's")
    ap.add_argument("--plan-impl", default="reentrant", choices=("reentrant", "non-reentrant"),
                    help="with --budget: the checkpoint implementation the plan is judged with")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.regions is not None and a.budget is None:
        ap.error("--regions applies with --budget")
    if a.accumulate:
        print(json.dumps(measure_accumulation(a.model, a.budget, a.accumulate), sort_keys=True))
        return
    regions = a.regions.split(",") if a.regions is not None else None
    print(json.dumps(measure(a.model, a.budget is not None, a.budget, a.impl, regions, a.plan_impl), sort_keys=True))


if __name__ == "__main__":
    main()
