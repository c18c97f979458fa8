#!/usr/bin/python3
"""Exports PyTorch models in training mode to ONNX without their weights, for the ONNX importer's
tests (tests/onnx_*_test.cc):

    /usr/bin/python3 tests/data/onnx/gen_models.py      (needs torch 1.13, torchvision, onnx)

Each model is exported at opset 13 with a symbolic batch axis named 'batch' and
do_constant_folding=False, then every initializer is converted to external data that points at
<name>.weights, an empty file: the graph keeps each initializer's dims and data type, so an
importer that reads shapes only works, and the file stays a few KB.

  resnet18_training.onnx          torchvision resnet18 (11,689,512 parameters)
  mobilenet_v2_training.onnx      torchvision mobilenet_v2 (3,504,872 parameters; ReLU6 as Clip,
                                  depthwise convolutions)
  tiny_transformer_training.onnx  embedding + pre-LN attention block + GELU MLP + head (the
                                  exporter's decompositions of LayerNorm, GELU and Linear on 3-D
                                  inputs); input ids [batch, 8]
"""
import math
import os

import onnx
import onnx.external_data_helper as ext
import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


class TinyTransformer(nn.Module):
    def __init__(self, d=16, heads=2, vocab=50, seq=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(d, vocab)
        self.heads = heads

    def forward(self, ids):
        b, s = ids.shape
        x = self.emb(ids) + self.pos(torch.arange(s))
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=-1)
        q = q.view(b, s, self.heads, -1).transpose(1, 2)
        k = k.view(b, s, self.heads, -1).transpose(1, 2)
        v = v.view(b, s, self.heads, -1).transpose(1, 2)
        a = self.drop((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1))
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, s, -1))
        x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
        return self.head(x)


def export(model, example, name, input_name):
    model.train()
    path = os.path.join(HERE, name + ".onnx")
    full = os.path.join(HERE, name + ".full.onnx")
    torch.onnx.export(model, example, full, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=[input_name], output_names=["output"], dynamic_axes={input_name: {0: "batch"}},
                      opset_version=13)
    m = onnx.load(full)
    os.remove(full)
    weights = name + ".weights"
    ext.convert_model_to_external_data(m, all_tensors_to_one_file=True, location=weights, size_threshold=0)
    for t in m.graph.initializer:
        t.ClearField("raw_data")  # strip: the external file stays empty
    onnx.save_model(m, path)
    open(os.path.join(HERE, weights), "wb").close()
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {path} ({os.path.getsize(path)} bytes); parameters: {params}")


def main():
    torch.manual_seed(0)
    export(torchvision.models.resnet18(), torch.randn(2, 3, 224, 224), "resnet18_training", "input")
    export(torchvision.models.mobilenet_v2(), torch.randn(2, 3, 224, 224), "mobilenet_v2_training", "input")
    export(TinyTransformer(), torch.randint(0, 50, (2, 8)), "tiny_transformer_training", "ids")


if __name__ == "__main__":
    main()
