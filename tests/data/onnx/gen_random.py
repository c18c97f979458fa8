#!/usr/bin/python3
"""Exports the random masks model code writes by hand, which torch.onnx spells with
RandomUniformLike (src/frontends/onnx/onnx_lower.cc, op_random_like; tests/onnx_random_test.cc):

    /usr/bin/python3 tests/data/onnx/gen_random.py      (needs torch 1.13 and onnx)

  rand_dropout.onnx    Linear(8, 16) -> h * (torch.rand_like(h) < 0.9).to(h.dtype) / 0.9 ->
                       Linear(16, 4): RandomUniformLike(h), Less 0.9, Cast, Mul, Div 0.9
  drop_path_rand.onnx  timm's drop_path before 0.5 (keep + torch.rand((B, 1, 1, 1)), floor,
                       x + y.div(keep) * r) around Conv(4, 4, 3) -> ReLU -> Conv(4, 4, 3):
                       Shape/Gather/Unsqueeze/Concat -> ConstantOfShape -> RandomUniformLike,
                       Add 0.9, Floor, Div 0.9, Mul, Add

torchvision 0.14's own stochastic depth (torchvision.ops.stochastic_depth: bernoulli_ on an
empty tensor) does not export in training mode with torch 1.13 ("ONNX export of operator
Bernoulli, out parameter is not supported"); nor does timm's later drop_path (bernoulli_).
Training mode, opset 13, do_constant_folding=False, a symbolic batch axis 'batch'; weights
inline (about 1-2 KB each).
"""
import os

import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class RandDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = self.fc1(x)
        m = (torch.rand_like(h) < 0.9).to(h.dtype)
        return self.fc2(h * m / 0.9)


class DropPathRand(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = self.c2(torch.relu(self.c1(x)))
        keep = 0.9
        r = keep + torch.rand((x.shape[0], 1, 1, 1), dtype=x.dtype, device=x.device)
        r = r.floor()
        return x + y.div(keep) * r


def export(name, model, x):
    torch.manual_seed(0)
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(model.train(), x, path, opset_version=13, input_names=["input"],
                      output_names=["out"], dynamic_axes={"input": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    print(name, os.path.getsize(path), [n.op_type for n in onnx.load(path).graph.node])


if __name__ == "__main__":
    torch.manual_seed(0)
    export("rand_dropout", RandDropout(), torch.randn(2, 8))
    export("drop_path_rand", DropPathRand(), torch.randn(2, 4, 8, 8))
