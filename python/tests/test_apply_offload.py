"""plan.apply(model) for a plan that offloads saved activations: the planned modules run their
forward under torch.autograd.graph.save_on_cpu(pin_memory=True), exactly those, with the
gradients of the unplanned step. On a CPU-only machine save_on_cpu copies saved tensors into new
CPU tensors, so the memory it saves shows only on CUDA: these tests check correctness and what was
applied, and the re-simulated CUDA estimate of the applied plan, not a CPU measurement."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402
from headroom import apply as ap  # noqa: E402

SOURCE = os.environ.get("HEADROOM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "validation"))
import applied  # noqa: E402

BUDGET = "60MiB"  # on the CUDA profile mlp-seq fits this only by offloading (6 ReLU outputs)


def offload_plan():
    model, x, y = applied.mlp_seq()
    plan = headroom.plan(model, x, loss_fn=lambda out: F.cross_entropy(out, y), budget=BUDGET,
                         strategy="offload", device="cuda", optimizer="sgd")
    return plan, x, y


def saved_outside_offload(model, x, y):
    """How many tensors autograd saves outside save_on_cpu regions (an outer saved-tensor hook
    sees only those: the innermost hooks win), and the loss."""
    count = [0]

    def pack(t):
        count[0] += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(model(x), y)
    return count[0], loss


def test_offload_plan_wraps_exactly_the_planned_modules():
    plan, x, y = offload_plan()
    offloaded = {d["layer"] for d in plan["decisions"]["layers"] if d["action"] == "offload"}
    assert offloaded, "the budget should need offloading"
    model, _, _ = applied.mlp_seq()
    plan.apply(model)
    wrapped = [name for name, m in model.named_modules() if ap.is_offloaded(m)]
    # Each child of the nn.Sequential is one op, named by its module path.
    assert sorted(wrapped) == sorted(offloaded)
    assert plan.applied["offload"] == wrapped
    assert sorted(plan.applied["offload_ops"]) == sorted(offloaded)
    assert plan.applied["offload_not_applied"] == []
    assert plan.applied["checkpoint"] == []
    # What was applied is re-simulated with --offload of those ops: at the backward's peak the six
    # ReLU outputs (2048 x 256 x 4 = 2,097,152 bytes each) are on the host, not the device.
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    plain = headroom.estimate(model, x, loss_fn=loss_fn, device="cuda", optimizer="sgd")
    got = plan.applied["estimate"]
    assert got == headroom.estimate(model, x, loss_fn=loss_fn, device="cuda", optimizer="sgd",
                                    offload=plan.applied["offload_ops"])
    saved = plain["breakdown_at_peak"]["saved_activations"] - got["breakdown_at_peak"]["saved_activations"]
    assert saved == len(offloaded) * 2048 * 256 * 4
    assert plain["peak_bytes"] - got["peak_bytes"] == saved


def test_offloaded_step_keeps_the_gradients_and_saves_through_save_on_cpu():
    plan, x, y = offload_plan()
    reference, _, _ = applied.mlp_seq()
    planned, _, _ = applied.mlp_seq()
    plan.apply(planned)
    n_ref, loss_ref = saved_outside_offload(reference, x, y)
    n_planned, loss_planned = saved_outside_offload(planned, x, y)
    # The wrapped modules' saved tensors went to save_on_cpu's hooks, not to the outer one.
    assert n_planned < n_ref
    loss_ref.backward()
    loss_planned.backward()
    assert torch.equal(loss_ref, loss_planned)
    for (name, a), (_, b) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(a.grad, b.grad), name


def test_offload_option_is_cuda_training_only():
    model, x, y = applied.mlp_seq()
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    plain = headroom.estimate(model, x, loss_fn=loss_fn, device="cuda", optimizer="sgd")
    off = headroom.estimate(model, x, loss_fn=loss_fn, device="cuda", optimizer="sgd", offload=["0", "2"])
    assert off["peak_bytes"] < plain["peak_bytes"]
    with pytest.raises(headroom.Error, match="applies to --device cuda"):
        headroom.estimate(model, x, loss_fn=loss_fn, device="cpu", optimizer="sgd", offload=["0"])
    with pytest.raises(headroom.Error, match="no op named 'nope'"):
        headroom.estimate(model, x, loss_fn=loss_fn, device="cuda", optimizer="sgd", offload=["nope"])
