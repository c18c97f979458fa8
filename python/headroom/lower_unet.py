"""Capture rules for the calls a UNet adds to the ones lower.py maps: F.conv_transpose2d
(nn.ConvTranspose2d's forward). Registered into lower._RULES when lower.py is imported.

Per-pixel cross-entropy ([N,C,H,W] logits, [N,H,W] targets) needs no lowering rule of its own:
lower.py's cross_entropy rule hands it to GraphBuilder.cross_entropy, which takes both forms. It
needs a meta fallback: its nll_loss2d has no meta kernel in 1.13, so the recorder gets the loss's
shape from _cross_entropy_on_meta instead.

Invariants: as lower.py's (a call this module cannot map exactly is a headroom.Error naming the
call and its module path).
"""
import torch

from ._native import Error
from .lower import _RULES, _Args, _pair
from .recorder import META_FALLBACKS


def _conv_transpose2d(L, c):
    a = _Args(c, ["input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"])
    if a("groups", 1) != 1:
        raise Error(f"capture: conv_transpose2d with groups {a('groups')} in module '{c.module}' is not mapped "
                    "(only groups 1)")
    L._set(c, L.b.conv_transpose2d(L._name(c, "conv_transpose2d"), L.T(a("input")), L.T(a("weight")),
                                   L.opt(a("bias")), _pair(a("stride", 1), "stride"),
                                   _pair(a("padding", 0), "padding"),
                                   _pair(a("output_padding", 0), "output_padding"),
                                   _pair(a("dilation", 1), "dilation"), 1))


def _cross_entropy_on_meta(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                           reduction="mean", label_smoothing=0.0):
    shape = () if reduction in ("mean", "sum") else tuple(target.shape)
    return torch.empty(shape, dtype=input.dtype, device="meta")


META_FALLBACKS["cross_entropy"] = _cross_entropy_on_meta

_RULES.update({
    "conv_transpose2d": _conv_transpose2d,
})
