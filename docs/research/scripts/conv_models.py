"""Conv layer shapes from torchvision models, N=2, 1 thread (or argv[1]); compact summary per layer:
every allocation classified against formulas (B = oneDNN channel block, 16 on AVX-512)."""
import sys, os; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn
torch.manual_seed(0); torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
B = int(os.environ.get('BLOCK', '16'))
def cb(c): return (c + B - 1) // B * B
shapes = [  # name, N, Cin, H, W, Cout, k, s, p, g, bias
 ("resnet conv1 7x7s2", 2, 3, 64, 64, 64, 7, 2, 3, 1, False),
 ("resnet l1 3x3 64", 2, 64, 16, 16, 64, 3, 1, 1, 1, False),
 ("resnet l2 3x3s2 64->128", 2, 64, 16, 16, 128, 3, 2, 1, 1, False),
 ("resnet l2 ds 1x1s2", 2, 64, 16, 16, 128, 1, 2, 0, 1, False),
 ("resnet50 1x1 256->64", 2, 256, 8, 8, 64, 1, 1, 0, 1, False),
 ("resnet50 1x1 64->256", 2, 64, 8, 8, 256, 1, 1, 0, 1, False),
 ("resnext 3x3 g32 128", 2, 128, 8, 8, 128, 3, 1, 1, 32, False),
 ("mbv2 first 3x3s2 3->32", 2, 3, 32, 32, 32, 3, 2, 1, 1, False),
 ("mbv2 dw 3x3 32", 2, 32, 16, 16, 32, 3, 1, 1, 32, False),
 ("mbv2 pw 32->16", 2, 32, 16, 16, 16, 1, 1, 0, 1, False),
 ("mbv2 pw 16->96", 2, 16, 16, 16, 96, 1, 1, 0, 1, False),
 ("mbv2 dw 3x3s2 96", 2, 96, 16, 16, 96, 3, 2, 1, 96, False),
 ("mbv2 dw 3x3 144", 2, 144, 8, 8, 144, 3, 1, 1, 144, False),
 ("densenet 1x1 96->128", 2, 96, 8, 8, 128, 1, 1, 0, 1, False),
 ("densenet 3x3 128->32", 2, 128, 8, 8, 32, 3, 1, 1, 1, False),
 ("inception 1x1 192->48 bias", 2, 192, 7, 7, 48, 1, 1, 0, 1, True),
 ("inception 5x5 48->64", 2, 48, 7, 7, 64, 5, 1, 2, 1, False),
 ("inception 1x7 128->128", 2, 128, 7, 7, 128, (1, 7), 1, (0, 3), 1, False),
 ("odd 3x3 20->36", 2, 20, 9, 9, 36, 3, 1, 1, 1, False),
]
for (name, N, Cin, H, W, Cout, k, s, p, g, bias) in shapes:
    conv = nn.Conv2d(Cin, Cout, k, stride=s, padding=p, groups=g, bias=bias)
    kh, kw = conv.kernel_size; ph, pw = conv.padding
    x = torch.randn(N, Cin, H, W, requires_grad=True)
    Ho = (H + 2*ph - kh)//s + 1; Wo = (W + 2*pw - kw)//s + 1
    F = {'in': N*Cin*H*W*4, 'out': N*Cout*Ho*Wo*4, 'W': Cout*(Cin//g)*kh*kw*4,
         'inB': N*cb(Cin)*H*W*4, 'outB': N*cb(Cout)*Ho*Wo*4,
         'W_OB': cb(Cout)*(Cin//g)*kh*kw*4, 'W_OBIB': cb(Cout)*cb(Cin//g)*kh*kw*4,
         'W_dwB': cb(g)*kh*kw*4 if g == Cin else -1, 'b': Cout*4}
    ps = [('W', conv.weight)] + ([('b', conv.bias)] if bias else [])
    tr = op_case(name, conv, [x], params=ps, show_graph=False, file=open('/dev/null', 'w'))
    inv = {}
    for kk, v in F.items():
        inv.setdefault(v, []).append(kk)
    def cls(e):
        if e['label'] not in ('(unlabelled)',) and not e['label'].startswith('free'):
            return e['label']
        return '|'.join(inv.get(abs(e['size']), ['?' + str(abs(e['size']))]))
    print(f"### {name}: x[{N},{Cin},{H},{W}] W[{Cout},{Cin//g},{kh},{kw}] g={g} -> out[{N},{Cout},{Ho},{Wo}]  "
          + ' '.join(f"{k_}={v}" for k_, v in F.items() if v > 0))
    for ph_ in ('fwd', 'bwd'):
        print(f"  {ph_}: " + ' '.join(('+' if e['size'] > 0 else '-') + cls(e) for e in tr.events if e['phase'] == ph_))
    print(f"  peak_over_start={tr.peak()}")
