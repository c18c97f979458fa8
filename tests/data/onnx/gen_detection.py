#!/usr/bin/python3
"""Exports the detection models that validation/detection.py measures, for
tests/onnx_detection_validation_test.cc:
    /usr/bin/python3 tests/data/onnx/gen_detection.py NAME tests/data/onnx/NAME_eval
NAME: fasterrcnn_mobilenet_v3_large_320_fpn or ssdlite320_mobilenet_v3_large. The model is
validation/detection.py's (same keyword arguments: score threshold 0; torch.manual_seed(0),
weights initialized as torchvision does), exported in eval mode (opset 13) on one 3x320x320 image.
Float initializers of more than 64 elements (the weights) point at NAME_eval.weights, an empty
file: the graph keeps their shapes and dtypes only; small constants stay inline (the import folds
them).
"""
import math
import os
import sys

import onnx
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "validation"))
import detection  # noqa: E402

name, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model, x, _, _ = detection.build(name, 1)
full = out + ".full.onnx"
torch.onnx.export(model, (x,), full, opset_version=13, input_names=["images"])
m = onnx.load(full)
os.remove(full)
wn = os.path.basename(out) + ".weights"
for t in m.graph.initializer:
    if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and math.prod(t.dims) > 64:
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", wn
onnx.save_model(m, out + ".onnx")
open(os.path.join(os.path.dirname(out), wn), "wb").close()
print(name, os.path.getsize(out + ".onnx"))
