"""Rules for the calls torchvision 0.14's classification and segmentation CNNs make beyond the
ResNet family (EfficientNet, MobileNetV3, MNASNet, ConvNeXt, GoogLeNet, Inception, LR-ASPP):
in-place activations and dropout, hardswish and hardsigmoid, and flatten of a tensor it cannot
view. Registered into lower._RULES at import (lower.py imports this module at its end).

What PyTorch 1.13 allocates and saves, per call (tools/autograd/derivatives.yaml; measured with
validation/run.py --suite captured):
- hardswish(x), hardsigmoid(x): a fresh output; backward reads self (hardswish_backward(grad,
  self), hardsigmoid_backward(grad, self)). headroom has no op kind for them: an Opaque op that keeps
  its input, the representation the ONNX importer gives HardSwish (src/frontends/onnx/onnx_lower.cc).
- silu_(x), hardswish_(x), hardsigmoid_(x) (nn.SiLU/Hardswish(inplace=True)): the output is x's
  storage; with autograd recording, the codegen'd in-place variant clones self before the write
  and saves the clone (a saved-tensor hook sees a tensor that is not x's storage). An in-place
  Opaque op: no allocation without autograd, an input-sized saved copy with it (op_rules.cc).
- dropout_(x) in training (nn.Dropout(inplace=True)): aten's _dropout<inplace=true> makes
  noise = empty_like(x).bernoulli_(1 - p).div_(1 - p), then x.mul_(noise); MulBackward0 keeps the
  noise. The same bytes and lifetime as the in-place Opaque op's saved copy: an input-sized
  tensor made before the write, kept for the backward.
- flatten(x) (torch.flatten, nn.Flatten): a view when the dimensions it merges can be viewed,
  else reshape's contiguous copy (at::flatten calls reshape). headroom's contiguity flag ignores
  size-1 dimensions as PyTorch's is_contiguous does (builder.cc, permute).

Stochastic depth (torchvision.ops.stochastic_depth) needs no rule of its own: its calls are
torch.empty, bernoulli_ and div_ on that factory tensor, and input * noise (lower.py's rules);
in eval it returns its input without a call.

Invariants: as lower.py's (a call these rules cannot map raises headroom.Error naming it).
"""
from ._native import Error
from . import lower
from .lower import _Args


def _inplace(c, a):
    return c.name.endswith("_") or bool(a("inplace", False))


def _elementwise(method):
    """silu, hardswish, hardsigmoid and their in-place forms. `method` is the GraphBuilder call of
    the out-of-place form (None: an Opaque op keeping its input)."""
    def rule(L, c):
        a = _Args(c, ["input", "inplace"])
        x = a("input")
        short = c.name.rstrip("_")
        name = L._name(c, short + ("_" if _inplace(c, a) else ""))
        if _inplace(c, a):
            L._set(c, L.b.elementwise_opaque(name, L.T(x), True))
        elif method is not None:
            L._set(c, getattr(L.b, method)(name, L.T(x)))
        else:
            L._set(c, L.b.elementwise_opaque(name, L.T(x), False))
    return rule


def _dropout(L, c):
    a = _Args(c, ["input", "p", "training", "inplace"])
    p, training = float(a("p", 0.5)), bool(a("training", True))
    if not training or p == 0.0 or not L.dropout:
        L._alias(c, a("input"))  # eval, p=0 or --dropout off: the input itself
        return
    if not _inplace(c, a):
        L._set(c, L.b.dropout(L._name(c, "dropout"), L.T(a("input")), p))
        return
    if p == 1.0:
        raise Error(f"capture: in-place dropout with p=1 in module '{c.module}' is not mapped")
    # In place: the noise (input-sized, kept for the backward) is the Opaque op's saved copy.
    L._set(c, L.b.elementwise_opaque(L._name(c, "dropout_"), L.T(a("input")), True))


def _flatten(L, c):
    a = _Args(c, ["input", "start_dim", "end_dim"])
    x = a("input")
    out = L.t.tensors[c.outputs[0]].shape
    if c.outputs[0] == x.tid or list(out) == list(L.t.tensors[x.tid].shape):
        L._alias(c, x)  # torch.flatten returns its input when nothing is merged
        return
    # reshape: a view of a contiguous tensor, else a contiguous copy viewed (builder.h).
    L._set(c, L.b.reshape(L._name(c, "flatten"), L.T(x), list(out)))


_VISION_RULES = {
    "silu": _elementwise("silu"), "silu_": _elementwise("silu"),
    "hardswish": _elementwise(None), "hardswish_": _elementwise(None),
    "hardsigmoid": _elementwise(None), "hardsigmoid_": _elementwise(None),
    "dropout": _dropout, "dropout_": _dropout,
    "flatten": _flatten,
}

lower._RULES.update(_VISION_RULES)
