#!/usr/bin/python3
"""Writes the ONNX seeds for sizes folded from Shape arithmetic and for random draws (issue 22):
Resize whose `sizes` is Shape -> Slice -> Mul -> Concat of a symbolic-batch input, or whose
size is Shape -> Cast -> Mul scale -> Floor -> Cast -> Concat (torchvision's segmentation heads),
Resize by `scales`, ScatterND into a ConstantOfShape of a folded shape (Swin's attention mask),
RandomUniformLike of a tensor and of ConstantOfShape (hand-written dropout, timm's drop_path),
RandomUniform / RandomNormal with a shape attribute, and SoftmaxCrossEntropyLoss (the in-graph loss).
Run with Debian's python3-onnx: /usr/bin/python3 gen_fold_seeds.py"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_seed import OUT, save


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


N = helper.make_node
save("resize_sizes_from_shape.onnx", [
    N("Shape", ["x"], ["s"]),
    N("Slice", ["s", "zero", "two"], ["nc"]),
    N("Slice", ["s", "two", "four"], ["hw"]),
    N("Mul", ["hw", "two"], ["hw2"]),
    N("Concat", ["nc", "hw2"], ["sizes"], axis=0),
    N("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
], [i64("zero", [0]), i64("two", [2]), i64("four", [4])], ["batch", 3, 8, 8])
save("resize_scaled_floor.onnx", [
    N("Shape", ["x"], ["s"]),
    N("Gather", ["s", "hw_idx"], ["hw"], axis=0),
    N("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
    N("Mul", ["hwf", "scale"], ["hws"]),
    N("Floor", ["hws"], ["hwfl"]),
    N("Cast", ["hwfl"], ["hwi"], to=TensorProto.INT64),
    N("Gather", ["s", "nc_idx"], ["nc"], axis=0),
    N("Concat", ["nc", "hwi"], ["sizes"], axis=0),
    N("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest"),
], [i64("hw_idx", [2, 3]), i64("nc_idx", [0, 1]), f32("scale", [1.5])], ["batch", 3, 8, 8])
save("resize_scales.onnx", [N("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
     [f32("scales", [1.0, 1.0, 2.5, 0.5])], ["batch", 3, 8, 8])
save("scatternd_folded_shape.onnx", [
    N("Shape", ["x"], ["s"]),
    N("ConstantOfShape", ["s"], ["zeros"]),
    N("Gather", ["x", "row_idx"], ["row"], axis=0),
    N("ScatterND", ["zeros", "idx", "row"], ["sc"]),
    N("Add", ["x", "sc"], ["y"]),
], [i64("row_idx", [0]), i64("idx", [[0]])], ["batch", 4])
save("random_like_mask.onnx", [
    N("RandomUniformLike", ["x"], ["r"]),
    N("Less", ["r", "p"], ["keep"]),
    N("Cast", ["keep"], ["m"], to=TensorProto.FLOAT),
    N("Mul", ["x", "m"], ["xm"]),
    N("Div", ["xm", "p"], ["y"]),
], [f32("p", 0.9)], ["batch", 16])
save("random_like_of_shape.onnx", [
    N("Shape", ["x"], ["s"]),
    N("Gather", ["s", "zero"], ["b"], axis=0),
    N("Concat", ["b", "ones"], ["rs"], axis=0),
    N("ConstantOfShape", ["rs"], ["z"]),
    N("RandomUniformLike", ["z"], ["r"], dtype=TensorProto.FLOAT),
    N("Add", ["r", "keep"], ["rk"]),
    N("Floor", ["rk"], ["mask"]),
    N("Mul", ["x", "mask"], ["y"]),
], [i64("zero", [0]), i64("ones", [1, 1, 1]), f32("keep", 0.9)], ["batch", 4, 8, 8])
save("random_shape_attr.onnx", [
    N("RandomNormal", [], ["r"], shape=[2, 16]),
    N("RandomUniform", [], ["u"], shape=[2, 16], dtype=TensorProto.FLOAT),
    N("Add", ["r", "u"], ["ru"]),
    N("Add", ["x", "ru"], ["y"]),
], [], ["batch", 16])


def save_with_target(name, nodes, ishape, tshape):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ishape)
    t = helper.make_tensor_value_info("t", TensorProto.INT64, tshape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph(nodes, "g", [x, t], [y]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(m.SerializeToString())


# The in-graph loss: F.cross_entropy's export, and the per-pixel form that is refused.
save_with_target("softmax_cross_entropy.onnx",
                 [N("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], reduction="mean")], ["batch", 4], ["batch"])
save_with_target("softmax_cross_entropy_pixels.onnx",
                 [N("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], reduction="sum")], ["batch", 4, 3, 3],
                 ["batch", 3, 3])
