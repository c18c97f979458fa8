"""The rules of python/headroom/lower_vision.py on small modules, each pinned by byte arithmetic:
in-place activations and dropout allocate nothing without autograd and keep an input-sized copy
with it; hardswish/hardsigmoid keep their input; flatten copies only what it cannot view; the
default loss sums every output tensor."""
import collections

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import headroom  # noqa: E402

N, D = 4, 256
ACT = N * D * 4          # one [4, 256] fp32 activation: 4,096 bytes
WEIGHTS = (D * D + D) * 4  # Linear(256, 256): 263,168 bytes


def peak(model, mode, x=None, loss_fn=None, **options):
    x = torch.randn(N, D) if x is None else x
    return headroom.estimate(model, x, mode=mode, device="cpu", loss_fn=loss_fn, **options)["peak_bytes"]


def forward_peak(model):
    x = torch.randn(N, D)
    return headroom.estimate(model, x, mode="train", device="cpu")["steps"][0]["phase_peaks"]["forward"]


def linear_then(*layers):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, D), *layers)


@pytest.mark.parametrize("act", [nn.Hardswish, nn.Hardsigmoid, nn.SiLU])
def test_inplace_activation_allocates_nothing_in_inference(act):
    base = peak(linear_then(), "infer")
    # input + weights + linear's output: 4,096 + 263,168 + 4,096
    assert base == ACT + WEIGHTS + ACT
    assert peak(linear_then(act(inplace=True)), "infer") == base
    # Out of place the activation's output is one more [4, 256] buffer while the linear's lives.
    assert peak(linear_then(act()), "infer") == base + ACT


@pytest.mark.parametrize("act", [nn.Hardswish, nn.Hardsigmoid, nn.SiLU])
def test_inplace_activation_keeps_a_copy_in_training(act):
    # The in-place form's saved clone of its input costs what the out-of-place form's fresh
    # output does (a [4, 256] buffer made at the op, kept to the backward), at every moment.
    inplace = headroom.trace(linear_then(act(inplace=True)), torch.randn(N, D), mode="train", device="cpu")
    out_of_place = headroom.trace(linear_then(act()), torch.randn(N, D), mode="train", device="cpu")
    assert peak(linear_then(act(inplace=True)), "train") == peak(linear_then(act()), "train")
    assert "clone" in inplace and "clone" not in out_of_place


@pytest.mark.parametrize("act", [nn.Hardswish, nn.Hardsigmoid])
def test_hardswish_keeps_its_input_as_silu_does(act):
    # hardswish_backward(grad, self) / hardsigmoid_backward(grad, self) read the input, as
    # silu_backward does: a fresh output, the input saved, a fresh gradient.
    for mode in ("infer", "train"):
        assert peak(linear_then(act()), mode) == peak(linear_then(nn.SiLU()), mode)
    cap = headroom.capture(linear_then(act()), torch.randn(N, D), mode="train")
    assert cap.parameter_count == D * D + D


def test_inplace_dropout_is_dropout_with_its_noise_saved():
    # dropout_ in training: noise = empty_like(x) (4,096 bytes), kept for the backward, the
    # output is x: the bytes and lifetimes of an in-place op that saves an input-sized copy.
    drop = peak(linear_then(nn.Dropout(0.5, inplace=True)), "train")
    assert drop == peak(linear_then(nn.Hardswish(inplace=True)), "train")
    # Forward peaks. In place: input + weights + linear's output + noise, then the default loss's
    # 4-byte sum: 4,096 + 263,168 + 4,096 + 4,096 + 4 = 275,460. Out of place, at the dropout:
    # input + weights + linear's output + noise + a fresh output = 279,552.
    assert forward_peak(linear_then(nn.Dropout(0.5, inplace=True))) == ACT + WEIGHTS + 2 * ACT + 4 == 275460
    assert forward_peak(linear_then(nn.Dropout(0.5))) == ACT + WEIGHTS + 3 * ACT == 279552
    # Inference and dropout="off": the input itself.
    assert peak(linear_then(nn.Dropout(0.5, inplace=True)), "infer") == peak(linear_then(), "infer")
    assert peak(linear_then(nn.Dropout(0.5, inplace=True)), "train", dropout="off") == \
        peak(linear_then(nn.Identity()), "train", dropout="off")


class PermuteFlatten(nn.Module):
    """[N, C, H, W] -> NHWC (a permuted view) -> flatten(1), as nn.Flatten after LayerNorm2d."""

    def forward(self, x):
        return torch.flatten(x.permute(0, 2, 3, 1), 1)


def test_flatten_copies_a_tensor_it_cannot_view():
    # [2, 8, 4, 4] fp32 = 1,024 bytes; NHWC cannot be viewed as [2, 128]: reshape's copy, 1,024.
    assert peak(PermuteFlatten(), "infer", torch.randn(2, 8, 4, 4)) == 1024 + 1024
    # At 1x1 the permute moves only size-1 dimensions: PyTorch's is_contiguous holds, flatten is
    # a view (ConvNeXt's classifier): the 64-byte input alone.
    assert peak(PermuteFlatten(), "infer", torch.randn(2, 8, 1, 1)) == 64


class Outputs(nn.Module):
    Pair = collections.namedtuple("Pair", "main aux")

    def __init__(self, kind):
        super().__init__()
        self.a = nn.Linear(D, 10)
        self.b = nn.Linear(D, 3)
        self.kind = kind

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        if self.kind == "dict":
            return collections.OrderedDict(out=a, aux=b)
        if self.kind == "namedtuple":
            return self.Pair(a, b)
        return a, b


@pytest.mark.parametrize("kind", ["tuple", "namedtuple", "dict"])
def test_default_loss_sums_every_output_tensor(kind):
    torch.manual_seed(0)
    model = Outputs(kind)
    x = torch.randn(N, D)
    explicit = (lambda o: o["out"].sum() + o["aux"].sum()) if kind == "dict" else (lambda o: o[0].sum() + o[1].sum())
    default = headroom.estimate(model, x, device="cpu")
    assert default["peak_bytes"] == headroom.estimate(model, x, device="cpu", loss_fn=explicit)["peak_bytes"]
    assert default["steps"] == headroom.estimate(model, x, device="cpu", loss_fn=explicit)["steps"]
