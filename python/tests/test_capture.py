"""Capture of nn.Modules: torchvision models lower to the same graph as their built-in twins (same
parameter count, same peak to the byte, training and inference, CPU and CUDA profiles), and what
cannot be captured is one headroom.Error naming the call and the module path."""
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402

BATCH = 2


def twin_estimates(name, mode, device):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)()
    x = torch.randn(BATCH, 3, 224, 224)
    y = torch.zeros(BATCH, dtype=torch.long)
    loss_fn = (lambda out: F.cross_entropy(out, y)) if mode == "train" else None
    options = dict(mode=mode, device=device, optimizer="adam")
    return headroom.estimate(name, batch=BATCH, **options), headroom.estimate(model, x, loss_fn=loss_fn, **options)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("name", ["resnet18", "resnet50", "mobilenet_v2", "vgg11"])
def test_torchvision_twin_equals_builtin(name, mode, device):
    builtin, captured = twin_estimates(name, mode, device)
    assert captured["parameter_count"] == builtin["parameter_count"]
    assert captured["weights_bytes"] == builtin["weights_bytes"]
    assert captured["peak_bytes"] == builtin["peak_bytes"]
    assert captured.get("steps") == builtin.get("steps")
    assert captured["breakdown_at_peak"] == builtin["breakdown_at_peak"]


def test_captured_fit_varies_the_batch_like_the_builtin():
    model = torchvision.models.resnet18()
    x = torch.randn(2, 3, 224, 224)
    y = torch.zeros(2, dtype=torch.long)
    ours = headroom.fit(model, x, loss_fn=lambda out: F.cross_entropy(out, y), gpu="T4")
    theirs = headroom.fit("resnet18", gpu="T4")
    ours.pop("model")
    theirs.pop("model")
    assert ours == theirs


def test_capture_leaves_the_module_as_it_was():
    model = torchvision.models.resnet18()
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    headroom.capture(model, torch.randn(1, 3, 64, 64), mode="train")
    after = model.state_dict()
    assert all(after[k].device.type == "cpu" and torch.equal(before[k], after[k]) for k in before)
    assert not model.training and not any(m.training for m in model.modules())


class Unmapped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ELU())

    def forward(self, x):
        return self.body(x)


def test_unmapped_call_names_the_call_and_module():
    with pytest.raises(headroom.Error, match=r"'elu' in module 'body.1'"):
        headroom.estimate(Unmapped(), torch.randn(1, 3, 8, 8))


class NeedsData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum().item() > 0:  # data-dependent control flow: no value on meta tensors
            return self.fc(x)
        return x


def test_model_failing_on_meta_tensors():
    with pytest.raises(headroom.Error, match="failed on meta tensors"):
        headroom.estimate(NeedsData(), torch.randn(2, 4))


def test_inputs_of_the_wrong_type():
    with pytest.raises(headroom.Error, match="example_inputs must be a tensor or a tuple of tensors"):
        headroom.estimate(torchvision.models.resnet18(), [1, 2, 3])


def test_module_without_inputs():
    with pytest.raises(headroom.Error, match="needs example_inputs"):
        headroom.estimate(torchvision.models.resnet18())


def test_batch_is_read_from_the_inputs():
    with pytest.raises(headroom.Error, match="batch is read from example_inputs"):
        headroom.estimate(torchvision.models.resnet18(), torch.randn(1, 3, 32, 32), batch=4)


def test_loss_fn_must_return_a_scalar():
    with pytest.raises(headroom.Error, match="scalar tensor"):
        headroom.estimate(torch.nn.Linear(4, 4), torch.randn(2, 4), loss_fn=lambda out: out * 2)


def test_loss_option_on_a_module():
    with pytest.raises(headroom.Error, match="pass loss_fn"):
        headroom.estimate(torch.nn.Linear(4, 4), torch.randn(2, 4), loss="mse")


class HeldLocal(torch.nn.Module):
    """a = fc1(x); b = relu(a); c = fc2(b); return c + a.sum(): `a` is referenced by Python until
    the return, past fc2."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 256)
        self.fc2 = torch.nn.Linear(256, 256)

    def forward(self, x):
        a = self.fc1(x)
        b = torch.relu(a)
        c = self.fc2(b)
        del b
        return c * 2.0


class DroppedLocal(HeldLocal):
    def forward(self, x):
        c = self.fc2(torch.relu(self.fc1(x)))
        return c * 2.0


def test_python_held_local_costs_its_bytes_in_inference():
    # In inference nothing is saved for backward: fc1's output (64 x 256 fp32 = 65,536 bytes) dies
    # at relu when dropped at once, but when `a` holds it, it is still alive at fc2 and at the
    # multiply: the peak grows by exactly its 65,536 bytes.
    x = torch.randn(64, 256)
    held = headroom.estimate(HeldLocal(), x, mode="infer", device="cpu")
    dropped = headroom.estimate(DroppedLocal(), x, mode="infer", device="cpu")
    assert held["peak_bytes"] - dropped["peak_bytes"] == 64 * 256 * 4


def test_loss_fn_in_inference_is_an_error():
    with pytest.raises(headroom.Error, match="loss_fn applies to mode='train'"):
        headroom.estimate(torch.nn.Linear(4, 4), torch.randn(2, 4), loss_fn=lambda out: out.sum(), mode="infer")


def test_a_capture_is_reused_and_checks_its_mode():
    cap = headroom.capture(torch.nn.Linear(64, 64), torch.randn(8, 64))
    assert headroom.estimate(cap, device="cpu") == headroom.estimate(torch.nn.Linear(64, 64), torch.randn(8, 64),
                                                                     device="cpu")
    with pytest.raises(headroom.Error, match="captured with mode='train'"):
        headroom.estimate(cap, mode="infer")


class Detaches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).detach().T


def test_tensor_returning_calls_without_a_rule_are_refused():
    with pytest.raises(headroom.Error, match="'detach' in module 'fc'|'detach'"):
        headroom.estimate(Detaches(), torch.randn(2, 4))
