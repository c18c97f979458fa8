"""plan.apply(model): the plan's checkpointing applied to the user's module through
torch.utils.checkpoint, measured on CPU with the validation harness (validation/applied.py, a fresh
process per measurement) against the plan's predicted peak, with the gradients of the unplanned
step."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402

SOURCE = os.environ.get("HEADROOM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "validation"))
import applied  # noqa: E402


def measure(*args):
    env = dict(os.environ, PYTHONHASHSEED="0")
    p = subprocess.run([sys.executable, os.path.join(SOURCE, "validation", "applied.py"), *args],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1])


def test_applied_plan_measures_its_predicted_peak():
    # Without a plan the prediction is exact (the premise), and so is the planned step: the plan
    # checkpoints Sequential children 1..9 and the measured peak is the plan's, to the byte.
    plain = measure("mlp-seq")
    assert plain["measured"] == plain["predicted"]
    planned = measure("mlp-seq", "--budget", "30MiB")
    assert planned["checkpoint"] == ["1..9"]
    assert planned["measured"] == planned["predicted"] == planned["plan_peak"]
    assert planned["measured"] < plain["measured"]


def test_applied_non_reentrant_plan_measures_its_re_estimate():
    # The same plan applied with use_reentrant=False: the re-estimate (--checkpoint-impl
    # non-reentrant) is what PyTorch allocates, to the byte, and no more than the reentrant plan's
    # peak (no re-run output or incoming gradient held for the segment's whole backward).
    planned = measure("mlp-seq", "--budget", "30MiB", "--impl", "non-reentrant")
    assert planned["checkpoint"] == ["1..9"]
    assert planned["measured"] == planned["predicted"]
    assert planned["predicted"] <= planned["plan_peak"]


def test_plan_judged_non_reentrant_is_applied_non_reentrant():
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget="30MiB",
                         strategy="checkpoint", device="cpu", optimizer="sgd", foreach=False,
                         checkpoint_impl="non-reentrant")
    assert plan["decisions"]["checkpoint_impl"] == "non-reentrant"
    plan.apply(model)
    assert plan.applied["checkpoint_impl"] == "non-reentrant"
    assert plan.applied["checkpoint"] == ["1..9"]
    assert plan.applied["estimate"]["peak_bytes"] == plan["peak_bytes"]


def test_apply_names_a_bad_checkpoint_impl():
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget="30MiB",
                         strategy="checkpoint", device="cpu", optimizer="sgd", foreach=False)
    with pytest.raises(headroom.Error, match="checkpoint_impl must be reentrant or non-reentrant, got 'lazy'"):
        plan.apply(model, checkpoint_impl="lazy")


def test_applied_plan_keeps_the_gradients():
    model, x, y = applied.mlp_seq()
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    plan = headroom.plan(model, x, loss_fn=loss_fn, budget="30MiB", strategy="checkpoint", device="cpu",
                         optimizer="sgd")
    reference, _, _ = applied.mlp_seq()
    planned, _, _ = applied.mlp_seq()
    plan.apply(planned)
    loss_fn(reference(x)).backward()
    loss_fn(planned(x)).backward()
    for (name, a), (_, b) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(a.grad, b.grad), name


def test_apply_needs_a_module_plan():
    plan = headroom.plan("mlp:layers=4,dim=64", budget="1GiB", device="cpu")
    with pytest.raises(headroom.Error, match="needs a plan made for an nn.Module"):
        plan.apply(torch.nn.Linear(2, 2))


def test_runs_that_no_module_covers_are_reported_as_applied():
    # torchvision's ResNet calls bn1, relu and maxpool from its own forward, not from a
    # Sequential: a planned run across them is applied module by module, and `applied` says so
    # with the re-simulated peak of what was applied.
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    x, y = torch.randn(8, 3, 128, 128), torch.randint(0, 10, (8,))
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    plan = headroom.plan(model, x, loss_fn=loss_fn, budget="130MiB", strategy="checkpoint", device="cpu",
                         optimizer="sgd")
    assert plan["decisions"]["recomputed_runs"] == ["bn1 .. maxpool (3 ops)"]
    plan.apply(torchvision.models.resnet18(num_classes=10))
    # relu is in place on bn1's output: checkpoint could not re-run it, so it is kept.
    assert plan.applied["checkpoint"] == ["bn1..bn1", "maxpool..maxpool"]
    again = headroom.estimate(model, x, loss_fn=loss_fn, device="cpu", optimizer="sgd",
                              checkpoint=plan.applied["checkpoint"])
    assert plan.applied["estimate"] == again


@pytest.mark.parametrize("budget,strategy,micro_batches,checkpoint", [
    ("25MiB", "accumulate", 2, []),
    ("20MiB", "accumulate", 4, []),
    ("10MiB", "accumulate+checkpoint", 8, ["1..9"]),
])
def test_accumulation_plan_step_measures_its_predicted_peak(budget, strategy, micro_batches, checkpoint):
    # plan.step runs the plan's micro-batches as a DataLoader at the micro-batch size hands them
    # over (one at a time), plan.apply its segments; the measured peak is the plan's.
    r = measure("mlp-seq", "--budget", budget, "--accumulate", strategy)
    assert (r["micro_batches"], r["checkpoint"]) == (micro_batches, checkpoint)
    assert r["measured"] == r["predicted"] == r["plan_peak"]


def test_plan_step_gradients_are_the_full_batch_mean():
    # Summing micro-batch gradients reorders the floating-point sums: equal to rounding, not bitwise.
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget="20MiB",
                         strategy="accumulate", device="cpu", optimizer="sgd")
    m = plan.micro_batch
    reference, _, _ = applied.mlp_seq()
    F.cross_entropy(reference(x), y).backward()
    stepped, _, _ = applied.mlp_seq()
    grads = {}

    class Capture(torch.optim.SGD):
        def step(self, closure=None):
            grads.update({n: p.grad.clone() for n, p in stepped.named_parameters()})

    opt = Capture(stepped.parameters(), lr=0.1)
    batches = ((x[i:i + m], y[i:i + m]) for i in range(0, x.shape[0], m))
    plan.step(stepped, batches, F.cross_entropy, opt)
    for name, p in reference.named_parameters():
        assert torch.allclose(p.grad, grads[name], rtol=1e-4, atol=1e-6), name


def test_plan_step_needs_enough_micro_batches():
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget="20MiB",
                         strategy="accumulate", device="cpu", optimizer="sgd")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(headroom.Error, match="gave 1 micro-batches, the plan runs 4"):
        plan.step(model, [(x[:512], y[:512])], F.cross_entropy, opt)


# A nested plan on the 16-layer MLP's Sequential: 1..25 in one call whose function checkpoints
# 1..9 (itself checkpointing 3..5) and 11..17; three levels of real nested checkpoint calls.
MLP_NESTED = ["1..25", "1..9", "3..5", "11..17"]


def nested_mlp_plan(impl="reentrant"):
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget="30MiB",
                         strategy="checkpoint", device="cpu", optimizer="sgd", foreach=False, checkpoint_impl=impl)
    plan["decisions"]["checkpoint_regions"] = list(MLP_NESTED)
    return plan, x, y


@pytest.mark.parametrize("impl", ["reentrant", "non-reentrant"])
def test_nested_plan_is_applied_as_nested_checkpoint_calls(impl, monkeypatch):
    # Every call apply makes goes through apply.checkpoint: count them and their depth in one
    # forward (no grad needed: the forward makes the calls).
    from headroom import apply as ap
    calls = []
    depth = [0]

    def counting(function, *args, **kwargs):
        calls.append(depth[0])
        depth[0] += 1
        try:
            return function(*args)
        finally:
            depth[0] -= 1

    plan, x, _ = nested_mlp_plan(impl)
    model = applied.mlp_seq()[0]
    plan.apply(model)
    assert plan.applied["checkpoint"] == MLP_NESTED
    assert plan.applied["checkpoint_impl"] == impl
    monkeypatch.setattr(ap, "checkpoint", counting)
    model(x)
    # 1..25 at depth 0; 1..9 and 11..17 inside it; 3..5 inside 1..9.
    assert calls == [0, 1, 2, 1]
    # The re-estimate is the nested plan's (estimate with the same nested ranges).
    again = headroom.estimate(plan._capture, device="cpu", optimizer="sgd", foreach=False, checkpoint=MLP_NESTED,
                              **({} if impl == "reentrant" else {"checkpoint_impl": impl}))
    assert plan.applied["estimate"] == again


@pytest.mark.parametrize("impl", ["reentrant", "non-reentrant"])
def test_applied_nested_plan_measures_its_re_estimate(impl):
    # The nested calls as PyTorch runs them, measured on CPU (fresh process): the re-estimate of
    # the nested ranges is what the allocator saw, to the byte (33,718,104 B reentrant when
    # measured for docs/planning.md).
    r = measure("mlp-seq", "--budget", "30MiB", "--regions", ",".join(MLP_NESTED), "--impl", impl)
    assert r["checkpoint"] == MLP_NESTED
    assert r["measured"] == r["predicted"]


@pytest.mark.parametrize("impl", ["reentrant", "non-reentrant"])
def test_applied_nested_resnet_plan_measures_its_re_estimate(impl):
    # resnet18's layerN (a Sequential of two BasicBlocks) in one call each, whose blocks are
    # checkpointed inside it (validation/ckpt.py's "nested" scheme, as a plan).
    import ckpt
    regions = ckpt.ranges("resnet18", "nested")
    r = measure("resnet18", "--budget", "130MiB", "--regions", ",".join(regions), "--impl", impl)
    assert sorted(r["checkpoint"]) == sorted(regions)
    assert r["measured"] == r["predicted"]


def test_applied_nested_plan_keeps_the_gradients():
    plan, x, y = nested_mlp_plan()
    reference, _, _ = applied.mlp_seq()
    planned, _, _ = applied.mlp_seq()
    plan.apply(planned)
    F.cross_entropy(reference(x), y).backward()
    F.cross_entropy(planned(x), y).backward()
    for (name, a), (_, b) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(a.grad, b.grad), name


def test_apply_names_a_region_the_capture_does_not_have():
    plan, _, _ = nested_mlp_plan()
    plan["decisions"]["checkpoint_regions"] = ["1..99"]
    model = applied.mlp_seq()[0]
    with pytest.raises(headroom.Error, match="region '1..99' names ops the module's capture does not have"):
        plan.apply(model)
    assert "forward" not in model.__dict__  # untouched


def test_planners_nested_plan_applied_measures_its_peak():
    # A 32-layer MLP under 34.5 MiB, judged non-reentrant: the checkpoint strategy's plan is
    # Rotor's, with 1..9 inside 1..17 (the single-level segments do not fit). plan.apply makes
    # exactly those calls and the step measures the plan's peak, 35,853,784 bytes, to the byte.
    r = measure("mlp-deep", "--budget", "34.5MiB", "--plan-impl", "non-reentrant", "--impl", "non-reentrant")
    assert "nested (Rotor)" in r["note"]
    planned = [tuple(map(int, x.split(".."))) for x in r["planned"]]
    assert any(o != i and o[0] <= i[0] and i[1] <= o[1] for o in planned for i in planned)
    assert r["checkpoint"] == r["planned"]
    assert r["measured"] == r["predicted"] == r["plan_peak"]
