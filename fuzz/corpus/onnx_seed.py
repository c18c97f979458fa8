"""What the ONNX seed generators share (gen_attr_seeds.py, gen_fold_seeds.py): the seed folder and
save(), which writes one graph of input x and output y at an opset."""
import os

from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")


def save(name, nodes, inits, ishape, opset=13):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ishape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(m.SerializeToString())
