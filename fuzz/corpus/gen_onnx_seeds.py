#!/usr/bin/python3
"""Writes the seed corpus of fuzz/onnx_import_fuzz.cc into fuzz/corpus/onnx/:

    /usr/bin/python3 fuzz/corpus/gen_onnx_seeds.py      (needs python3-onnx)

Tiny valid models that reach the importer's main paths (layers, shape folding, decompositions,
views, external data), truncated copies of some of them, and the torch.onnx export of a small
transformer from tests/data/onnx (weights stripped).
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "onnx")
EXPORTED = os.path.join(HERE, "..", "..", "tests", "data", "onnx", "tiny_transformer_training.onnx")


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def weight(name, dims, external=False):
    t = numpy_helper.from_array(np.zeros(dims, dtype=np.float32), name)
    if external:
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "missing.bin"
    return t


def toposort(nodes):
    """Nodes in an order where every input is produced before it is read (seeds list them freely)."""
    made = {o for n in nodes for o in n.output}
    done, out, pending = set(), [], list(nodes)
    while pending:
        ready = [n for n in pending if all(i not in made or i in done for i in n.input)]
        for n in ready:
            out.append(n)
            done.update(n.output)
        pending = [n for n in pending if n not in ready]
    return out


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(toposort(nodes), "seed", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="seed")


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def seeds():
    yield "relu_chain", model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "x"], ["y"])],
                              [vi("x", ["batch", 4])], [vi("y", None)])
    yield "conv_net", model([
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n", "rm", "rv", "sm", "sv"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
        [vi("x", ["batch", 3, 8, 8])], [vi("y", None)],
        [weight("w", [4, 3, 3, 3]), weight("s", [4]), weight("b", [4]), weight("m", [4]), weight("v", [4]),
         weight("fw", [5, 4], external=True), weight("fb", [5])])
    yield "attention", model([
        helper.make_node("Transpose", ["wq"], ["wqt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "wqt"], ["q0"]), helper.make_node("Add", ["bq", "q0"], ["q"]),
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]), const("c", 2.0, np.float32),
        helper.make_node("Div", ["s", "c"], ["sc"]), helper.make_node("Softmax", ["sc"], ["a"], axis=-1),
        helper.make_node("Dropout", ["a", "ratio", "train"], ["d", "mask"]),
        const("ratio", 0.1, np.float32), const("train", True, np.bool_),
        helper.make_node("MatMul", ["d", "q"], ["y"])],
        [vi("x", ["batch", 3, 4])], [vi("y", None)], [weight("wq", [4, 4]), weight("bq", [4])])
    yield "gelu_layernorm", model([
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]), helper.make_node("Sub", ["x", "m"], ["d"]),
        const("two", 2.0, np.float32), helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]), const("eps", 1e-5, np.float32),
        helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "lw"], ["nw"]),
        helper.make_node("Add", ["nw", "lb"], ["h"]), const("r2", 1.4142135, np.float32),
        helper.make_node("Div", ["h", "r2"], ["hs"]), helper.make_node("Erf", ["hs"], ["e"]),
        const("one", 1.0, np.float32), helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]), const("half", 0.5, np.float32),
        helper.make_node("Mul", ["he", "half"], ["y"])],
        [vi("x", ["batch", 6])], [vi("y", None)], [weight("lw", [6]), weight("lb", [6])])
    yield "shapes", model([
        helper.make_node("Shape", ["x"], ["s"]), const("i0", 0), helper.make_node("Gather", ["s", "i0"], ["n"]),
        const("ax", [0]), helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), const("rest", [-1]),
        helper.make_node("Concat", ["n1", "rest"], ["t"], axis=0), helper.make_node("Reshape", ["x", "t"], ["f"]),
        const("sp", [4, 8]), helper.make_node("Split", ["f", "sp"], ["a", "b"], axis=1),
        const("st", [1]), const("en", [100]), const("ax1", [1]),
        helper.make_node("Slice", ["b", "st", "en", "ax1"], ["c"]),
        helper.make_node("Range", ["z", "lim", "one"], ["r"]), const("z", 0), const("lim", 3), const("one", 1),
        helper.make_node("Gather", ["emb", "r"], ["e"]),
        helper.make_node("Cast", ["a"], ["ah"], to=TensorProto.FLOAT16),
        helper.make_node("Expand", ["c", "shape"], ["ce"]), const("shape", [2, 7]),
        helper.make_node("Where", ["cond", "ce", "zero"], ["w"]), const("zero", 0.0, np.float32),
        helper.make_node("ConstantOfShape", ["shape"], ["cond"], value=numpy_helper.from_array(np.array([1], np.bool_)))],
        [vi("x", ["batch", 3, 4])], [vi("w", None), vi("e", None), vi("ah", None, TensorProto.FLOAT16)],
        [weight("emb", [10, 5])])


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, m in seeds():
        data = m.SerializeToString()
        with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
            f.write(data)
        if name in ("conv_net", "attention"):
            for frac in (3, 2):
                with open(os.path.join(OUT, f"{name}_truncated_{frac}.onnx"), "wb") as f:
                    f.write(data[: len(data) * (frac - 1) // frac])
    shutil.copyfile(EXPORTED, os.path.join(OUT, "torch_tiny_transformer.onnx"))
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
