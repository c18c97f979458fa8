#!/usr/bin/python3
"""Writes the ONNX seeds for data-dependent sizes bounded at import (issue 22,
src/frontends/onnx/onnx_detection.h): score thresholding (NonZero) feeding a TopK whose k is
min(k, n) and an If on numel() == 0 (torchvision's postprocessing), NonMaxSuppression with its
box limit and the Gather of the kept indices (eager's [n] indices, onnx_patterns.h), RoiAlign on
a feature map, MultiScaleRoIAlign's per-level NonZero(Equal(levels, l)) counts (a partition,
onnx_level_partition.h), their merge into one zero-filled result by a chain of ScatterElements
(torchvision's _onnx_merge_levels, written in place as eager does: onnx_patterns.h), and an If on
a runtime value after a NonZero (still refused in one line).
Run with Debian's python3-onnx: /usr/bin/python3 gen_detection_seeds.py"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_seed import save

N = helper.make_node


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


def branch(nodes, out):
    o = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
    return helper.make_graph(nodes, "branch", [], [o])


# x [batch, 8]: keep = NonZero(x > 0.5); k = Min(n, 5); TopK(flat x, k); If(numel == 0, ., Relu).
save("detect_threshold_topk.onnx", [
    N("Greater", ["x", "half"], ["mask"]),
    N("NonZero", ["mask"], ["keep"]),
    N("Shape", ["keep"], ["ks"]),
    N("Slice", ["ks", "one", "two"], ["n"]),
    N("Min", ["n", "five"], ["k"]),
    N("Reshape", ["x", "flat"], ["fx"]),
    N("TopK", ["fx", "k"], ["vals", "idx"]),
    N("Size", ["vals"], ["count"]),
    N("Equal", ["count", "zero"], ["empty"]),
    N("If", ["empty"], ["y"], then_branch=branch([N("Identity", ["vals"], ["e"])], "e"),
      else_branch=branch([N("Relu", ["vals"], ["r"])], "r")),
], [f32("half", 0.5), i64("one", [1]), i64("two", [2]), i64("five", [5]), i64("flat", [-1]),
    i64("zero", 0)], ["batch", 8])

# x [batch, 20, 4] boxes; scores from a ReduceSum; NMS with a limit of 3; Gather column 2.
save("detect_nms.onnx", [
    N("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
    N("Slice", ["xt", "zero1", "one1", "one1"], ["scores"]),
    N("NonMaxSuppression", ["x", "scores", "limit", "iou"], ["sel"]),
    N("Gather", ["sel", "col"], ["keep"], axis=1),
    N("Gather", ["x", "keep"], ["y"], axis=1),
], [i64("zero1", [0]), i64("one1", [1]), i64("limit", [3]), f32("iou", 0.5), i64("col", 2)],
    ["batch", 20, 4])

# x [batch, 4, 16, 16] features; 3 fixed rois on image 0; RoiAlign 7x7.
save("detect_roi_align.onnx", [
    N("RoiAlign", ["x", "rois", "bidx"], ["y"], output_height=7, output_width=7,
      sampling_ratio=2, spatial_scale=0.25),
], [f32("rois", [[0, 0, 8, 8], [4, 4, 12, 12], [0, 0, 16, 16]]), i64("bidx", [0, 0, 0])],
    ["batch", 4, 16, 16])

# A condition on values (the sum of the kept scores), not on a bounded size: one line, exit 2.
save("detect_runtime_cond.onnx", [
    N("Greater", ["x", "half"], ["mask"]),
    N("NonZero", ["mask"], ["keep"]),
    N("ReduceSum", ["x"], ["s"], keepdims=0),
    N("Greater", ["s", "zerof"], ["cond"]),
    N("If", ["cond"], ["y"], then_branch=branch([N("Relu", ["x"], ["r"])], "r"),
      else_branch=branch([N("Identity", ["x"], ["e"])], "e")),
], [f32("half", 0.5), f32("zerof", 0.0)], ["batch", 8])

# Mask pasting in small (_onnx_paste_mask_in_image): boxes x [batch, 4] clipped to a 16x16 image,
# the first box's width w = x2 - x0 + 1 (at least 1) sizes a Resize of the boxes seen as a
# [1, 1, batch, 4] mask to [1, 1, w, w]; w's range bounds it at 17 (onnx_value_range.h).
save("detect_paste_resize.onnx", [
    N("Greater", ["x", "half"], ["mask"]),
    N("NonZero", ["mask"], ["keep"]),
    N("Max", ["x", "zerof"], ["lo"]),
    N("Min", ["lo", "side"], ["clipped"]),
    N("Gather", ["clipped", "first"], ["box"], axis=0),
    N("Gather", ["box", "c0"], ["x0"], axis=0),
    N("Gather", ["box", "c2"], ["x2"], axis=0),
    N("Sub", ["x2", "x0"], ["span"]),
    N("Add", ["span", "onef"], ["w1"]),
    N("Cast", ["w1"], ["wi"], to=TensorProto.INT64),
    N("Unsqueeze", ["wi", "axis0"], ["wv"]),
    N("Concat", ["wv", "onei"], ["w_or_1"], axis=0),
    N("ReduceMax", ["w_or_1"], ["w"], keepdims=1),
    N("Concat", ["lead", "w", "w"], ["sizes"], axis=0),
    N("Reshape", ["x", "as_mask"], ["m"]),
    N("Resize", ["m", "", "", "sizes"], ["y"], mode="linear"),
], [f32("half", 0.5), f32("zerof", 0.0), f32("side", 16.0), i64("first", 0), i64("c0", 0),
    i64("c2", 2), f32("onef", 1.0), i64("axis0", [0]), i64("onei", [1]), i64("lead", [1, 1]),
    i64("as_mask", [1, 1, -1, 4])], ["batch", 4])

# MultiScaleRoIAlign in small: 6 fixed rois get a level from a runtime value (levels = their
# row sums times mean(x) > 8, as int64); per level l: NonZero(Equal(levels, l)), its rois,
# RoiAlign 7x7; the two levels' outputs concatenated. The counts partition the 6 rois.
levels = [
    N("ReduceMean", ["x"], ["mean"], keepdims=0),
    N("ReduceSum", ["rois", "axis1"], ["rowsum"], keepdims=0),
    N("Mul", ["rowsum", "mean"], ["score"]),
    N("Greater", ["score", "eight"], ["big"]),
    N("Cast", ["big"], ["levels"], to=TensorProto.INT64),
]
for l in range(2):
    levels += [
        N("Equal", ["levels", f"l{l}"], [f"eq{l}"]),
        N("NonZero", [f"eq{l}"], [f"nz{l}"]),
        N("Reshape", [f"nz{l}", "flat"], [f"idx{l}"]),
        N("Gather", ["rois", f"idx{l}"], [f"rois{l}"], axis=0),
        N("Mul", [f"idx{l}", "zero"], [f"bidx{l}"]),
        N("RoiAlign", ["x", f"rois{l}", f"bidx{l}"], [f"pooled{l}"], output_height=7, output_width=7,
          sampling_ratio=2, spatial_scale=0.25),
    ]
level_inits = [f32("rois", [[0, 0, 8, 8], [4, 4, 12, 12], [0, 0, 16, 16], [2, 2, 6, 6],
                             [1, 1, 15, 15], [8, 8, 16, 16]]),
               i64("axis1", [1]), f32("eight", 8.0), i64("l0", 0), i64("l1", 1), i64("flat", [-1]),
               i64("zero", 0)]
save("detect_roi_levels.onnx", levels + [N("Concat", ["pooled0", "pooled1"], ["y"], axis=0)],
     level_inits, ["batch", 4, 16, 16])

# The same levels merged as _onnx_merge_levels exports it: res = zeros([6, 4, 7, 7]); per level
# res = ScatterElements(res, Expand(Reshape(idx_l, [-1, 1, 1, 1]), Shape(pooled_l)), pooled_l).
merge = [N("ConstantOfShape", ["res_shape"], ["res"])]
for l in range(2):
    merge += [
        N("Reshape", [f"idx{l}", "col4"], [f"idx4_{l}"]),
        N("Shape", [f"pooled{l}"], [f"ps{l}"]),
        N("Expand", [f"idx4_{l}", f"ps{l}"], [f"index{l}"]),
        N("ScatterElements", ["res" if l == 0 else "merged0", f"index{l}", f"pooled{l}"],
          ["merged0" if l == 0 else "y"], axis=0),
    ]
save("detect_roi_merge.onnx", levels + merge,
     level_inits + [i64("res_shape", [6, 4, 7, 7]), i64("col4", [-1, 1, 1, 1])],
     ["batch", 4, 16, 16])
