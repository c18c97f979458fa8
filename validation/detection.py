"""Detection models measured in inference on the CPU (issue 22: the export's upper bounds against
the truth), with the same harness as the built-in cases:

    /usr/bin/python3 validation/run.py --suite detection     # -> validation/detection.json
    /usr/bin/python3 validation/detection.py                 # the counts each stage kept

A case's model is "detection:<name>" with <name> a key of MODELS: torchvision 0.14's model with
weights=None, weights_backbone=None (initialized as torchvision does, torch.manual_seed(0) as
every case), in eval mode, on one 3x320x320 image of torch.rand.

Random weights make the number of detections depend on the seed. The score threshold is set to 0
(box_score_thresh / score_thresh): every softmax score is above it, so every candidate passes it,
which is the bound headroom takes for the threshold's NonZero (its input's size). What follows is
the file's own limits (top-k, detections_per_img) and NMS, whose survivors are counted by
`counts()` and reported in docs/accuracy.md. tests/data/onnx/gen_detection.py exports the same
models with the same settings for tests/onnx_detection_validation_test.cc.
"""
import torch
import torchvision

import cases as _cases

IMAGE = (3, 320, 320)

# name -> the model's keyword arguments (the threshold at 0: every candidate passes it).
MODELS = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": dict(box_score_thresh=0.0),
    "ssdlite320_mobilenet_v3_large": dict(score_thresh=0.0),
}


def make(name):
    return torchvision.models.get_model(name, weights=None, weights_backbone=None, **MODELS[name])


def build(name, batch):
    """-> (model, inputs, targets, loss_fn): the model in eval mode and a list of one image."""
    assert batch == 1, "a detection export holds one image"
    model = make(name)
    model.eval()
    return model, [torch.rand(*IMAGE)], None, None


CASES = [_cases.case("detection:" + name, "infer", 1) for name in MODELS]


def counts(name):
    """What each data-dependent stage kept in the measured run (same seed, model and image)."""
    import torchvision.ops.boxes as B
    torch.manual_seed(0)
    model, x, _, _ = build(name, 1)
    kept = []
    nms = B.batched_nms

    def logged(boxes, scores, idxs, thr):
        keep = nms(boxes, scores, idxs, thr)
        kept.append((boxes.shape[0], keep.shape[0]))
        return keep
    for mod in (torchvision.models.detection.rpn, torchvision.models.detection.roi_heads,
                torchvision.models.detection.ssd, B):
        if hasattr(mod, "batched_nms"):
            setattr(mod, "batched_nms", logged)
    with torch.no_grad():
        out = model(x)
    for mod in (torchvision.models.detection.rpn, torchvision.models.detection.roi_heads,
                torchvision.models.detection.ssd, B):
        if hasattr(mod, "batched_nms"):
            setattr(mod, "batched_nms", nms)
    return dict(nms=kept, detections=int(out[0]["boxes"].shape[0]))


if __name__ == "__main__":
    torch.set_num_threads(1)
    for n in MODELS:
        print(n, counts(n))
