#!/usr/bin/python3
"""Exports one tiny Conv-BatchNorm-ReLU-Dropout-Linear network three ways, for the tests of what an
export is (src/frontends/onnx/onnx_export_kind.h, tests/onnx_export_kind_test.cc):

    /usr/bin/python3 tests/data/onnx/gen_export_kinds.py      (needs torch 1.13 and onnx)

  tiny_cnn_eval.onnx          torch.onnx.export's default (eval mode): the BatchNorm folded into
                              the Conv, whose weights are then named 'onnx::Conv_*'; no Dropout
  tiny_cnn_training.onnx      training=TrainingMode.TRAINING, do_constant_folding=False: Conv,
                              BatchNormalization with its running statistics outputs, Dropout
  tiny_cnn_fixed_batch.onnx   the training export without dynamic_axes: input [2, 3, 8, 8]

The first two have a symbolic batch axis named 'batch'. Weights are inline (about 2 KB).
"""
import os

import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x))).flatten(1)))


def export(name, training, dynamic):
    torch.manual_seed(0)
    m = TinyCnn()
    m.train(training)
    kwargs = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False) if training else {}
    if dynamic:
        kwargs["dynamic_axes"] = {"input": {0: "batch"}}
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(m, torch.randn(2, 3, 8, 8), path, opset_version=13, input_names=["input"],
                      output_names=["logits"], **kwargs)
    print(name, [n.op_type for n in onnx.load(path).graph.node])


if __name__ == "__main__":
    export("tiny_cnn_eval", training=False, dynamic=True)
    export("tiny_cnn_training", training=True, dynamic=True)
    export("tiny_cnn_fixed_batch", training=True, dynamic=False)
