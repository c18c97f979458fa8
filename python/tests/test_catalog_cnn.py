"""Every torchvision 0.14 classification CNN and every segmentation model captures and estimates,
inference and training with the default loss (the sum of every output tensor), without an error,
and predicts a peak of at least the weights. The list is explicit: a torchvision upgrade that adds
a model fails test_the_catalog_is_torchvisions until the model is listed (vit_*, swin_* and
maxvit_* are test_catalog_transformers' side).

The models are built with their parameters on the meta device (MetaInit below): capture swaps them
for meta tensors anyway, and regnet_y_128gf's 2.6 GB of weights would otherwise be allocated and
initialised for nothing. Inputs are the smallest that every model of the list accepts (64x64),
inception_v3 299x299 (its auxiliary head's 5x5 convolution needs Mixed_6e at 17x17 in training).
"""
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
from torch.overrides import TorchFunctionMode  # noqa: E402

import headroom  # noqa: E402

CLASSIFICATION = [
    "alexnet",
    "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
    "densenet121", "densenet161", "densenet169", "densenet201",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",
    "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
    "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l",
    "googlenet", "inception_v3",
    "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small",
    "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf",
    "regnet_x_16gf", "regnet_x_32gf",
    "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf",
    "regnet_y_16gf", "regnet_y_32gf", "regnet_y_128gf",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
    "squeezenet1_0", "squeezenet1_1",
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
    "wide_resnet50_2", "wide_resnet101_2",
]
SEGMENTATION = [
    "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet50", "deeplabv3_resnet101",
    "fcn_resnet50", "fcn_resnet101", "lraspp_mobilenet_v3_large",
]
TRANSFORMERS = ("vit_", "swin_", "maxvit_")

# BatchNorm in training needs more than one value per channel: DeepLabV3's ASPP and Inception v3's
# auxiliary head normalise a 1x1 map, so their training steps run at batch 2.
TRAIN_BATCH = {"deeplabv3_mobilenet_v3_large": 2, "deeplabv3_resnet50": 2, "deeplabv3_resnet101": 2,
               "inception_v3": 2}
SIDE = {"inception_v3": 299}


class MetaInit(TorchFunctionMode):
    """Module construction with parameters and buffers on the meta device (their initialisers are
    then no-ops). torch.tensor stays real: regnet reads its stage depths back with tolist()."""
    FACTORIES = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.FACTORIES:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def build(name):
    with MetaInit():
        if name in SEGMENTATION:
            return torchvision.models.get_model(name, weights=None, weights_backbone=None)
        return torchvision.models.get_model(name, weights=None)


def test_the_catalog_is_torchvisions():
    from torchvision.models import list_models
    listed = [n for n in list_models(module=torchvision.models) if not n.startswith(TRANSFORMERS)]
    assert sorted(listed) == sorted(CLASSIFICATION)
    assert sorted(list_models(module=torchvision.models.segmentation)) == sorted(SEGMENTATION)


@pytest.mark.parametrize("name", CLASSIFICATION + SEGMENTATION)
def test_captures_and_estimates(name):
    model = build(name)
    side = SIDE.get(name, 64)
    for mode in ("infer", "train"):
        batch = TRAIN_BATCH.get(name, 1) if mode == "train" else 1
        cap = headroom.capture(model, torch.empty(batch, 3, side, side), mode=mode)
        est = headroom.estimate(cap, device="cpu", mode=mode)
        assert est["peak_bytes"] >= est["weights_bytes"] > 0, (mode, est["peak_bytes"], est["weights_bytes"])
        # Every parameter of the module is a parameter of the captured graph.
        assert est["parameter_count"] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("name", ["densenet121", "inception_v3"])
def test_twin_equals_builtin(name, mode, device):
    # The built-in twins (src/frontends/zoo): DenseNet's concatenations, Inception v3 at 299x299
    # with its auxiliary head in training (the built-in loss adds 0.4 x the auxiliary loss).
    import torch.nn.functional as F
    batch, side = 2, 299 if name == "inception_v3" else 224
    y = torch.zeros(batch, dtype=torch.long)
    loss_fn = None
    if mode == "train":
        loss_fn = ((lambda o: F.cross_entropy(o.logits, y) + 0.4 * F.cross_entropy(o.aux_logits, y))
                   if name == "inception_v3" else (lambda o: F.cross_entropy(o, y)))
    options = dict(mode=mode, device=device, optimizer="adam")
    builtin = headroom.estimate(name, batch=batch, **options)
    captured = headroom.estimate(build(name), torch.empty(batch, 3, side, side), loss_fn=loss_fn, **options)
    assert captured["parameter_count"] == builtin["parameter_count"]
    assert captured["peak_bytes"] == builtin["peak_bytes"]
    assert captured["breakdown_at_peak"] == builtin["breakdown_at_peak"]
