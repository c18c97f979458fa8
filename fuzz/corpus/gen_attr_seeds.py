#!/usr/bin/python3
"""Writes the ONNX seeds that carry window, block, scale and axis attributes (issue 18: no seed
had `strides`, so the fuzzer never reached ONNX's division by them). conv_strides_zero.onnx is
the crash that was found by hand: strides 0 killed the process with SIGFPE inside InferShapes;
it now fails with one line. Run with Debian's python3-onnx: /usr/bin/python3 gen_attr_seeds.py"""
import numpy as np
from onnx import helper, numpy_helper

from onnx_seed import save

w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
w2 = numpy_helper.from_array(np.zeros((3, 4, 3, 3), np.float32), "w2")
save("conv_strides.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                                            dilations=[1, 1], group=1)], [w], ["batch", 3, 8, 8])
save("conv_strides_zero.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])], [w],
     ["batch", 3, 8, 8])
save("conv_transpose_strides.onnx", [helper.make_node("ConvTranspose", ["x", "w2"], ["y"], strides=[2, 2],
                                                      output_padding=[1, 1])], [w2], ["batch", 3, 8, 8])
save("maxpool_strides.onnx", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                               pads=[1, 1, 1, 1])], [], ["batch", 3, 8, 8])
save("avgpool_1d.onnx", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[2])], [],
     ["batch", 3, 8])
save("depth_to_space.onnx", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], [], ["batch", 4, 8, 8])
save("transpose_reduce.onnx", [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                               helper.make_node("ReduceMean", ["t"], ["y"], axes=[1], keepdims=0)], [],
     ["batch", 3, 8])
save("upsample_scales.onnx", [helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0])], [],
     ["batch", 3, 8, 8], opset=7)
