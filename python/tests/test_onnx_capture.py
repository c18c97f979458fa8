"""The same nn.Module read two ways: torchvision's fcn_resnet50 exported by torch.onnx in training
mode (tests/data/onnx/fcn_resnet50_training.onnx, gen_torchvision.py) and captured with
headroom.capture. Its head ends in F.interpolate(x, size=input.shape[-2:]), exported as a Resize
whose size is Shape arithmetic on the dynamic batch (onnx_lower.cc, op_resize folds it); before,
the import stopped there. Both must give the same simulation to the byte: peak and breakdown, in
inference and in training with the loss the ONNX import attaches to a 4-D output (MSE against a
target of the output's shape), on the CPU and CUDA profiles."""
import os

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402

BATCH = 2
EXPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "onnx",
                      "fcn_resnet50_training.onnx")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["infer", "train"])
def test_fcn_resnet50_export_equals_capture(mode, device):
    torch.manual_seed(0)
    model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False)
    x = torch.randn(BATCH, 3, 224, 224)
    options = dict(mode=mode, device=device)
    if mode == "train":
        target = torch.zeros(BATCH, 21, 224, 224)
        options["optimizer"] = "sgd"
        captured = headroom.estimate(model, x, loss_fn=lambda out: F.mse_loss(out["out"], target), **options)
    else:
        captured = headroom.estimate(model, x, **options)
    exported = headroom.estimate(EXPORT, batch=BATCH, **options)
    assert exported["parameter_count"] == captured["parameter_count"]
    assert exported["peak_bytes"] == captured["peak_bytes"]
    assert exported["breakdown_at_peak"] == captured["breakdown_at_peak"]
