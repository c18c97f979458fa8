#!/usr/bin/python3
"""Exports Linear(8, 16) -> activation -> Linear(16, 4) once per activation that torch.onnx
decomposes, for the decomposition patterns (src/frontends/onnx/onnx_patterns.h,
tests/onnx_activation_patterns_test.cc):

    /usr/bin/python3 tests/data/onnx/gen_activations.py      (needs torch 1.13 and onnx)

  act_gelu_tanh.onnx   nn.GELU(approximate="tanh"): Mul(x,x), Mul(x,.), Mul 0.044715, Add x,
                       Mul sqrt(2/pi), Tanh, Add 1, Mul x, Mul 0.5
  act_new_gelu.onnx    Hugging Face's NewGELUActivation written out: 0.5 * x * (1 + tanh(
                       sqrt(2/pi) * (x + 0.044715 * torch.pow(x, 3.0)))): Pow, and 0.5 * x first;
                       model code, several eager calls: must stay node by node
  act_silu.onnx        nn.SiLU: Sigmoid, Mul x
  act_hardswish.onnx   nn.Hardswish at opset 13: HardSigmoid(alpha 1/6), Mul x
  act_mish.onnx        nn.Mish: Softplus, Tanh, Mul x

Training mode, opset 13, do_constant_folding=False, a symbolic batch axis 'batch'; weights inline
(about 1 KB each).
"""
import math
import os

import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class NewGelu(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Mlp(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = act
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def export(name, act):
    torch.manual_seed(0)
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(Mlp(act), torch.randn(2, 8), path, opset_version=13, input_names=["input"],
                      output_names=["out"], dynamic_axes={"input": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    print(name, [n.op_type for n in onnx.load(path).graph.node])


if __name__ == "__main__":
    export("act_gelu_tanh", nn.GELU(approximate="tanh"))
    export("act_new_gelu", NewGelu())
    export("act_silu", nn.SiLU())
    export("act_hardswish", nn.Hardswish())
    export("act_mish", nn.Mish())
