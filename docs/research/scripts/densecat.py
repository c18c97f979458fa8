"""DenseNet-style concat: cat backward slices flowing into conv/maxpool producers, and a feature used by two cats."""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(1)
x = torch.randn(2, 8, 10, 10)
ca = nn.Conv2d(8, 16, 3, padding=1, bias=False); cb = nn.Conv2d(8, 12, 3, padding=1, bias=False)
bn1 = nn.BatchNorm2d(28); cc = nn.Conv2d(28, 20, 1, bias=False)
bn2 = nn.BatchNorm2d(48); cd = nn.Conv2d(48, 4, 1, bias=False)
ps = list(ca.parameters()) + list(cb.parameters()) + list(bn1.parameters()) + list(cc.parameters()) + list(bn2.parameters()) + list(cd.parameters())
def setup():
    for p in ps: p.grad = None
def fn():
    with phase('fwd'):
        a = ca(x); mark('a[2,16,10,10]', a)      # 12800 B
        b = cb(x); mark('b[2,12,10,10]', b)      # 9600 B
        y = torch.cat([a, b], 1); mark('y=cat(a,b)', y)   # 22400
        z = cc(F.relu(bn1(y)))                  # [2,20,10,10] 16000
        mark('z', z)
        y2 = torch.cat([a, b, z], 1); mark('y2=cat(a,b,z)', y2)  # 38400
        out = cd(F.relu(bn2(y2)))
        loss = out.sum()
    with phase('bwd'):
        loss.backward()
for _ in range(2): setup(); fn()
setup()
tr, _ = trace(fn, warmup=0)
for e in tr.events:
    e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path'] if p not in ('aten::conv2d', 'aten::convolution', 'aten::_convolution', 'aten::batch_norm', 'aten::_batch_norm_impl_index')][-3:]
header("densenet-like: a=conv(x), b=conv(x), y=cat(a,b), z=conv(relu(bn(y))), y2=cat(a,b,z), out=conv(relu(bn(y2)))")
print("  sizes: a=12800 b=9600 z=16000 y=22400 y2=38400")
tr.table(min_bytes=500)
