#!/usr/bin/python3
"""Writes the ONNX seeds for control flow resolved at import (issue 22, onnx_control_flow.h): an If
on Shape(x)[1] == 1 with Squeeze / Identity branches (torch.onnx's squeeze of a dimension it
cannot prove is 1), the same on the batch dimension, a nested If inside the taken branch, a
branch passing an outer tensor and a branch initializer through, an If on a runtime value (refused
in one line), a Loop with a constant trip count and a Scan over a static length (both
unrolled).
Run with Debian's python3-onnx: /usr/bin/python3 gen_control_flow_seeds.py"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_seed import save

N = helper.make_node


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def branch(nodes, out, inits=()):
    o = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
    return helper.make_graph(nodes, "branch", [], [o], initializer=list(inits))


def squeeze_branch(tag=""):
    return branch([N("Constant", [], ["axes" + tag], value=i64("axes" + tag, [1])),
                   N("Squeeze", ["x", "axes" + tag], ["sq" + tag])], "sq" + tag)


def identity_branch(tag=""):
    return branch([N("Identity", ["x"], ["id" + tag])], "id" + tag)


def cond_on_dim(axis):
    return [N("Shape", ["x"], ["s"]),
            N("Gather", ["s", "idx"], ["d"], axis=0),
            N("Equal", ["d", "one"], ["cond"])], [i64("idx", axis), i64("one", 1)]


def squeeze_if(then_b, else_b, name, axis=1):
    nodes, inits = cond_on_dim(axis)
    nodes.append(N("If", ["cond"], ["t"], name=name, then_branch=then_b, else_branch=else_b))
    nodes.append(N("Relu", ["t"], ["y"]))
    return nodes, inits


nodes, inits = squeeze_if(squeeze_branch(), identity_branch(), "if")
save("if_squeeze.onnx", nodes, inits, ["batch", 1, 8])
nodes, inits = squeeze_if(squeeze_branch(), identity_branch(), "on_batch", axis=0)
save("if_on_batch.onnx", nodes, inits, ["batch", 1, 8])  # the fuzzer's batch 2: else
inner = branch([N("If", ["cond"], ["inner"], then_branch=squeeze_branch("_i"),
                  else_branch=identity_branch("_i"))], "inner")
nodes, inits = squeeze_if(inner, identity_branch(), "nested")
save("if_nested.onnx", nodes, inits, ["batch", 1, 8])
through = helper.make_graph([], "through", [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)])
init = branch([], "w", [numpy_helper.from_array(np.zeros((2, 1, 8), np.float32), "w")])
nodes, inits = squeeze_if(init, through, "through")
save("if_pass_through.onnx", nodes, inits, ["batch", 3, 8])  # else: x itself
save("if_runtime_cond.onnx", [
    N("ReduceSum", ["x"], ["sum"], keepdims=0),
    N("Greater", ["sum", "zero"], ["cond"]),
    N("If", ["cond"], ["y"], then_branch=squeeze_branch(), else_branch=identity_branch()),
], [numpy_helper.from_array(np.array(0, np.float32), "zero")], ["batch", 1, 8])
body = helper.make_graph(
    [N("Identity", ["c_in"], ["c_out"]), N("Relu", ["v_in"], ["v_out"])], "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)])
save("loop_static_trip.onnx", [N("Loop", ["trip", "", "x"], ["y"], body=body)],
     [i64("trip", 3)], ["batch", 8])
scan_body = helper.make_graph(
    [N("Add", ["h_in", "x_t"], ["h_out"]), N("Relu", ["h_out"], ["y_t"])], "body",
    [helper.make_tensor_value_info("h_in", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("x_t", TensorProto.FLOAT, None)],
    [helper.make_tensor_value_info("h_out", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("y_t", TensorProto.FLOAT, None)])
save("scan_static_length.onnx", [
    N("ReduceSum", ["x", "one"], ["h"], keepdims=0),
    N("Scan", ["h", "x"], ["h_final", "y"], body=scan_body, num_scan_inputs=1,
      scan_input_axes=[1], scan_output_axes=[1]),
], [i64("one", [1])], ["batch", 4, 8])
