"""Capture of the calls a UNet adds (python/headroom/lower_unet.py): nn.ConvTranspose2d, and
per-pixel cross-entropy, whose nll_loss2d has no meta kernel in PyTorch 1.13. The peaks
themselves are compared with measurements in test_validation.py (captured:unet,
captured:conv-transpose); here: what is refused, and the forms that must agree."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402


class Up(nn.Module):
    def __init__(self, groups=1, output_padding=0):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=output_padding, groups=groups)

    def forward(self, x, size=None):
        return self.up(x, output_size=size) if size is not None else self.up(x)


def test_grouped_transposed_convolution_is_refused_by_name():
    x = torch.randn(2, 8, 16, 16)
    with pytest.raises(headroom.Error, match="conv_transpose2d with groups 2 in module 'up'"):
        headroom.estimate(Up(groups=2), x, mode="infer", device="cpu")


def test_output_size_equals_the_explicit_output_padding():
    # ConvTranspose2d(x, output_size=[32, 32]) from 16x16 at stride 2, padding 1, kernel 3 picks
    # output_padding 1 (31 + 1); capture sees the padding the module passes to F.conv_transpose2d.
    x = torch.randn(2, 8, 16, 16)

    class Sized(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Up()

        def forward(self, x):
            return self.inner(x, size=[32, 32])

    a = headroom.estimate(Sized(), x, mode="infer", device="cpu")
    b = headroom.estimate(Up(output_padding=1), x, mode="infer", device="cpu")
    assert a["peak_bytes"] == b["peak_bytes"]


def test_per_pixel_cross_entropy_trains_and_checks_its_targets():
    net = nn.Conv2d(3, 4, 1)
    x = torch.randn(2, 3, 8, 8)
    y = torch.randint(0, 4, (2, 8, 8))
    e = headroom.estimate(net, x, loss_fn=lambda out: F.cross_entropy(out, y), device="cpu", optimizer="sgd")
    assert e["peak_phase"] == "backward"
    wrong = torch.randint(0, 4, (2, 8, 7))
    with pytest.raises(headroom.Error, match=r"class targets for scores \[2,4,8,8\] must be \[2,8,8\] \(class dimension 1\), got \[2,8,7\]"):
        headroom.estimate(net, x, loss_fn=lambda out: F.cross_entropy(out, wrong), device="cpu", optimizer="sgd")
