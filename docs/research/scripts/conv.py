"""nn.Conv2d allocation traces (fp32, NCHW contiguous). Usage: conv.py [threads]"""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn
torch.manual_seed(0)
th = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(th)
print(f"threads={torch.get_num_threads()}")
def c16(c): return (c + 15) // 16 * 16
def c8(c): return (c + 7) // 8 * 8

def case(N, Cin, H, W, Cout, k, s=1, p=0, d=1, g=1, bias=True, xgrad=True, train=True):
    conv = nn.Conv2d(Cin, Cout, k, stride=s, padding=p, dilation=d, groups=g, bias=bias)
    x = torch.randn(N, Cin, H, W, requires_grad=xgrad)
    Ho = (H + 2*p - d*(k-1) - 1)//s + 1; Wo = (W + 2*p - d*(k-1) - 1)//s + 1
    cands = {'in': N*Cin*H*W*4, 'out': N*Cout*Ho*Wo*4, 'W': Cout*Cin//g*k*k*4,
             'in16': N*c16(Cin)*H*W*4, 'out16': N*c16(Cout)*Ho*Wo*4,
             'in8': N*c8(Cin)*H*W*4, 'out8': N*c8(Cout)*Ho*Wo*4,
             'W_O16': c16(Cout)*(Cin//g)*k*k*4, 'W_O16I16': c16(Cout)*c16(Cin//g)*k*k*4,
             'W_G16': c16(g)*(Cout//g)*(Cin//g)*k*k*4 if g > 1 else -1,
             'W_O8I8': c8(Cout)*c8(Cin//g)*k*k*4, 'b': Cout*4, 'b16': c16(Cout)*4}
    params = [('W', conv.weight)] + ([('b', conv.bias)] if bias else [])
    if not train:
        for q in conv.parameters(): q.requires_grad_(False)
    title = (f"conv N={N} Cin={Cin} {H}x{W} Cout={Cout} k={k} s={s} p={p} d={d} g={g} bias={bias} "
             f"x.requires_grad={xgrad} {'train' if train else 'no_grad'} -> out {N}x{Cout}x{Ho}x{Wo}")
    op_case(title, conv, [x], params=params if train else [], train=train, cands=cands)
    print('  sizes:', {k_: v for k_, v in cands.items() if v > 0})

for train in (True, False):
    case(2, 3, 10, 12, 8, 3, p=1, train=train)
    case(2, 24, 9, 11, 40, 3, p=1, train=train)
    case(2, 32, 10, 12, 48, 3, s=2, p=1, bias=False, train=train)
    case(2, 24, 9, 11, 40, 1, train=train)
    case(16, 24, 9, 11, 40, 1, train=train)
    case(2, 32, 10, 12, 48, 1, s=2, bias=False, train=train)
    case(2, 24, 9, 11, 24, 3, p=1, g=24, bias=False, train=train)
    case(2, 32, 9, 11, 48, 3, p=1, g=4, bias=False, train=train)
    case(2, 24, 13, 11, 40, 3, p=2, d=2, bias=False, train=train)
    case(2, 64, 8, 8, 64, 3, p=1, bias=False, train=train)
case(2, 24, 9, 11, 40, 3, p=1, xgrad=False)
case(2, 24, 9, 11, 40, 1, xgrad=False)
