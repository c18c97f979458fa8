"""Every torchvision 0.14 transformer classifier (vit_*, swin_*, swin_v2_*, maxvit_t) is captured and
estimated in inference and in training at batch 1 on meta tensors: no capture error, a positive
peak of at least the parameter bytes. The list is explicit so that a model that stops mapping
fails here by name.

The models are built with torch.nn.init's initializers replaced by no-ops: capture never reads a
parameter's values, and initializing vit_h_14's 632 million parameters would dominate the run."""
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

import headroom  # noqa: E402

MODELS = [
    "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
    "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b",
    "maxvit_t",
]

_INITS = ["trunc_normal_", "normal_", "uniform_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
          "xavier_normal_", "zeros_", "ones_", "constant_"]


@pytest.fixture(scope="module")
def built():
    """name -> model, built once for both modes with the initializers skipped."""
    saved = {n: getattr(torch.nn.init, n) for n in _INITS}
    try:
        for n in _INITS:
            setattr(torch.nn.init, n, lambda t, *a, **k: t)
        yield {name: getattr(torchvision.models, name)(weights=None) for name in MODELS}
    finally:
        for n, f in saved.items():
            setattr(torch.nn.init, n, f)


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("name", MODELS)
def test_transformer_classifier_is_captured(built, name, mode):
    model = built[name]
    r = headroom.estimate(model, torch.empty(1, 3, 224, 224), mode=mode, device="cpu")
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert r["parameter_count"] == sum(p.numel() for p in model.parameters())
    assert r["input_bytes"] == 3 * 224 * 224 * 4  # every tensor made in forward is traced, none is an input
    assert r["peak_bytes"] >= parameter_bytes > 0
