#!/usr/bin/python3
"""Exports a model whose forward returns its loss, for the in-graph loss (src/frontends/onnx/
onnx_lower.cc, op_softmax_cross_entropy; tests/onnx_loss_test.cc):

    /usr/bin/python3 tests/data/onnx/gen_losses.py      (needs torch 1.13 and onnx)

  loss_cross_entropy.onnx  F.cross_entropy(fc2(relu(fc1(x))), target), Linear(8, 16),
                           Linear(16, 4): Gemm, Relu, Gemm, SoftmaxCrossEntropyLoss (mean)

torch 1.13 writes F.nll_loss(F.log_softmax(z, 1), target) as the same single
SoftmaxCrossEntropyLoss node. Training mode, opset 13, do_constant_folding=False, symbolic batch
axes on both inputs; weights inline (about 1 KB).
"""
import os

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class WithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x, target):
        return F.cross_entropy(self.fc2(torch.relu(self.fc1(x))), target)


if __name__ == "__main__":
    torch.manual_seed(0)
    path = os.path.join(HERE, "loss_cross_entropy.onnx")
    torch.onnx.export(WithLoss().train(), (torch.randn(2, 8), torch.zeros(2, dtype=torch.long)), path,
                      opset_version=13, input_names=["input", "target"], output_names=["loss"],
                      dynamic_axes={"input": {0: "batch"}, "target": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    print(os.path.getsize(path), [n.op_type for n in onnx.load(path).graph.node])
