"""Larger shapes, run with argv[1] threads: which ops allocate thread-count-dependent buffers?"""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
th = int(sys.argv[1]); torch.set_num_threads(th)
print('threads', torch.get_num_threads())
def R(*s, g=True): return torch.randn(*s, requires_grad=g)
bn = nn.BatchNorm2d(64); ln = nn.LayerNorm(256); emb = nn.Embedding(1000, 256)
conv = nn.Conv2d(64, 64, 3, padding=1, bias=False); lin = nn.Linear(256, 512)
cases = [
 ("BN train x[8,64,28,28]", lambda x: bn(x), [R(8, 64, 28, 28)], [('W', bn.weight), ('b', bn.bias)]),
 ("LayerNorm(256) x[8,128,256]", ln, [R(8, 128, 256)], [('W', ln.weight), ('b', ln.bias)]),
 ("Embedding(1000,256) ids[8,128]", emb, [torch.randint(0, 1000, (8, 128))], [('W', emb.weight)]),
 ("CE logits[1024,1000]", lambda x, t: F.cross_entropy(x, t), [R(1024, 1000), torch.randint(0, 1000, (1024,))], []),
 ("sum(dim=-1) x[64,64,256]", lambda x: x.sum(-1), [R(64, 64, 256)], []),
 ("softmax x[8,4,128,128]", lambda x: x.softmax(-1), [R(8, 4, 128, 128)], []),
 ("conv3x3 64->64 x[8,64,28,28]", conv, [R(8, 64, 28, 28)], [('W', conv.weight)]),
 ("Linear(256,512) x[8,128,256]", lin, [R(8, 128, 256)], [('W', lin.weight), ('b', lin.bias)]),
 ("maxpool3s2 x[8,64,56,56]", nn.MaxPool2d(3, 2, 1), [R(8, 64, 56, 56)], []),
 ("adaptive avg (1,1) x[8,512,7,7]", nn.AdaptiveAvgPool2d(1), [R(8, 512, 7, 7)], []),
 ("gelu x[8,128,1024]", F.gelu, [R(8, 128, 1024)], []),
 ("dropout x[8,128,1024]", nn.Dropout(0.1), [R(8, 128, 1024)], []),
 ("mse x[1024,1000]", lambda x, y: F.mse_loss(x, y), [R(1024, 1000), torch.randn(1024, 1000)], []),
]
for t, op, ins, ps in cases:
    tr = op_case(t, op, ins, params=ps, show_graph=False, file=open('/dev/null', 'w'))
    print(f"### {t}")
    print("  seq:", ' '.join(('+' if e['size'] > 0 else '-') + str(abs(e['size'])) for e in tr.events))
    print(f"  peak_over_start={tr.peak()} net={tr.net()}")
