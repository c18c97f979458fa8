"""Conv with batch N=1 (inference-style): when does PyTorch 1.13 choose thnn (slow_conv2d, im2col) instead of oneDNN?"""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn
torch.manual_seed(0); torch.set_num_threads(1)
for (Cin, H, W, Cout, k, s, p, g) in [(16, 8, 9, 24, 3, 1, 1, 1), (16, 8, 9, 24, 3, 2, 1, 1), (16, 8, 9, 24, 1, 1, 0, 1),
                                     (16, 40, 36, 24, 3, 1, 1, 1), (16, 8, 9, 16, 3, 1, 1, 16), (3, 20, 20, 8, 5, 1, 2, 1)]:
    conv = nn.Conv2d(Cin, Cout, k, stride=s, padding=p, groups=g, bias=False)
    x = torch.randn(1, Cin, H, W, requires_grad=True)
    Ho = (H + 2*p - k)//s + 1; Wo = (W + 2*p - k)//s + 1
    cands = {'in': Cin*H*W*4, 'out': Cout*Ho*Wo*4, 'W': Cout*Cin//g*k*k*4, 'cols=Cin*k*k*Ho*Wo': Cin//g*k*k*Ho*Wo*4 if g == 1 else -1}
    for train in (True, False):
        op_case(f"N=1 x[1,{Cin},{H},{W}] numel={Cin*H*W} k={k} s={s} p={p} g={g} Cout={Cout} {'train' if train else 'no_grad'}",
                conv, [x], params=[('W', conv.weight)] if train else [], train=train, cands=cands, show_graph=False)
    print('  sizes:', cands)
