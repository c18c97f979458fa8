"""Same as conv.py for a subset, to be run with ONEDNN_MAX_CPU_ISA=AVX2 (8-wide blocking) vs default (AVX-512 here)."""
import sys, os; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn
torch.manual_seed(0); torch.set_num_threads(1)
print('ONEDNN_MAX_CPU_ISA =', os.environ.get('ONEDNN_MAX_CPU_ISA'))
def c16(c): return (c + 15) // 16 * 16
def c8(c): return (c + 7) // 8 * 8
for (N, Cin, H, W, Cout, k, s, p) in [(2, 24, 9, 11, 40, 3, 1, 1), (2, 3, 10, 12, 8, 3, 1, 1), (16, 24, 9, 11, 40, 1, 1, 0), (2, 20, 9, 11, 12, 3, 2, 1)]:
    conv = nn.Conv2d(Cin, Cout, k, stride=s, padding=p, bias=False)
    x = torch.randn(N, Cin, H, W, requires_grad=True)
    Ho = (H + 2*p - k)//s + 1; Wo = (W + 2*p - k)//s + 1
    cands = {'in': N*Cin*H*W*4, 'out': N*Cout*Ho*Wo*4, 'W': Cout*Cin*k*k*4, 'in16': N*c16(Cin)*H*W*4, 'out16': N*c16(Cout)*Ho*Wo*4,
             'in8': N*c8(Cin)*H*W*4, 'out8': N*c8(Cout)*Ho*Wo*4, 'W_O16I16': c16(Cout)*c16(Cin)*k*k*4, 'W_O8I8': c8(Cout)*c8(Cin)*k*k*4,
             'W_O16': c16(Cout)*Cin*k*k*4, 'W_O8': c8(Cout)*Cin*k*k*4}
    op_case(f"conv N={N} Cin={Cin} {H}x{W} Cout={Cout} k={k} s={s} p={p}", conv, [x], params=[('W', conv.weight)], cands=cands, show_graph=False)
    print('  sizes:', cands)
