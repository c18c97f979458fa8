#!/usr/bin/python3
"""Exports validation/models.py BERT and GPT-2 (HF-equivalent nn.Modules) in training mode to ONNX
with stripped weights, for tests/cli_test.cc:
    /usr/bin/python3 tests/data/onnx/gen_transformers.py tests/data/onnx/bert_base_training bert-base 128
    /usr/bin/python3 tests/data/onnx/gen_transformers.py tests/data/onnx/gpt2_training gpt2 128
"""
import sys, os, torch, onnx
import onnx.external_data_helper as ext
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'validation'))
import models
out = sys.argv[1]; name = sys.argv[2]; seq = int(sys.argv[3])
model, x, y, lf = models.build(name, 2, seq)
model.train()
class Wrap(torch.nn.Module):
    def __init__(s, m): super().__init__(); s.m = m
    def forward(s, ids): return s.m(ids)
w = Wrap(model)
full = out + ".full.onnx"
torch.onnx.export(w, (x,), full, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input_ids"], output_names=["output"], dynamic_axes={"input_ids": {0: "batch"}}, opset_version=14)
m = onnx.load(full); os.remove(full)
wn = os.path.basename(out) + ".weights"
ext.convert_model_to_external_data(m, all_tensors_to_one_file=True, location=wn, size_threshold=0)
for t in m.graph.initializer: t.ClearField("raw_data")
onnx.save_model(m, out + ".onnx"); open(os.path.join(os.path.dirname(out), wn), "wb").close()
print("ok", os.path.getsize(out + ".onnx"))
