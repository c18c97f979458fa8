#!/usr/bin/python3
"""Exports validation/models.py's Llama in training mode to ONNX with stripped weights:
    /usr/bin/python3 tests/data/onnx/gen_llama.py OUT_STEM [NAME] [SEQ]
NAME defaults to llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000 and SEQ to 128.
The rotary embedding's cos.squeeze(1).squeeze(0) exports as If nodes (torch.onnx cannot prove the
squeezed dimensions are 1): the file tests the import's If folding (docs/onnx.md). Every
initializer points at OUT_STEM.weights, an empty file.
"""
import os, sys
import torch, onnx
import onnx.external_data_helper as ext
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "validation"))
import models  # noqa: E402

out = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else "llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000"
seq = int(sys.argv[3]) if len(sys.argv) > 3 else 128
torch.manual_seed(0)
m = models.LlamaForCausalLM(models.config(name))
m.train()
ids = torch.randint(0, 100, (2, seq))
full = out + ".full.onnx"
torch.onnx.export(m, ids, full, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input_ids"], output_names=["logits"],
                  dynamic_axes={"input_ids": {0: "batch", 1: "seq"}}, opset_version=14)
mm = onnx.load(full); os.remove(full)
wn = os.path.basename(out) + ".weights"
ext.convert_model_to_external_data(mm, all_tensors_to_one_file=True, location=wn, size_threshold=0)
for t in mm.graph.initializer: t.ClearField("raw_data")
onnx.save_model(mm, out + ".onnx"); open(os.path.join(os.path.dirname(out) or ".", wn), "wb").close()
print(name, os.path.getsize(out + ".onnx"))
