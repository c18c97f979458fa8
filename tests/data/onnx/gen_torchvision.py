#!/usr/bin/python3
"""Exports a torchvision model in training mode to ONNX with stripped weights, for tests/cli_test.cc
and tests/onnx_validation_test.cc:
    /usr/bin/python3 tests/data/onnx/gen_torchvision.py NAME tests/data/onnx/NAME_training [SIDE]
Committed: alexnet vgg11 vgg16 vgg19 resnet34 resnet50 resnet101 resnet152 densenet121
inception_v3 (aux_logits=False, as validation's inception_v3:aux=false) vit_b_16, and the
segmentation model fcn_resnet50 (aux_loss=False; python/tests/test_onnx_capture.py: its Resize
takes its size from Shape arithmetic); resnet18 and mobilenet_v2 come from gen_models.py. Every initializer points at NAME_training.weights, an empty
file: the graph keeps shapes and dtypes only (vgg19's file is 11 KB for 548 MB of weights).
With SIDE, the image is SIDE x SIDE (default 224, inception_v3 299) and the name ends in _SIDE:
the 64x64 (squeezenet1_1 96x96) exports of tests/onnx_captured_validation_test.cc, at the image
size of validation/captured.py's measured cases: shufflenet_v2_x0_5 mnasnet0_5 regnet_x_400mf
regnet_y_400mf mobilenet_v3_small resnext50_32x4d squeezenet1_1 lraspp_mobilenet_v3_large
fcn_resnet50 deeplabv3_mobilenet_v3_large.
"""
import sys, os, torch, torchvision, onnx
import onnx.external_data_helper as ext
name = sys.argv[1]; out = sys.argv[2]
kw = {'init_weights': False} if name in ('inception_v3',) else {}
if name == 'inception_v3': kw['aux_logits'] = False
if name in ('fcn_resnet50', 'deeplabv3_mobilenet_v3_large', 'lraspp_mobilenet_v3_large'):
    if name != 'lraspp_mobilenet_v3_large': kw['aux_loss'] = False
    m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, **kw)
else:
    m = getattr(torchvision.models, name)(**kw)
m.train()
size = int(sys.argv[3]) if len(sys.argv) > 3 else 299 if name == 'inception_v3' else 224
x = torch.randn(2, 3, size, size)
full = out + ".full.onnx"
torch.onnx.export(m, x, full, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}}, opset_version=14)
mm = onnx.load(full); os.remove(full)
wn = os.path.basename(out) + ".weights"
ext.convert_model_to_external_data(mm, all_tensors_to_one_file=True, location=wn, size_threshold=0)
for t in mm.graph.initializer: t.ClearField("raw_data")
onnx.save_model(mm, out + ".onnx"); open(os.path.join(os.path.dirname(out), wn), "wb").close()
print(name, os.path.getsize(out + ".onnx"))
