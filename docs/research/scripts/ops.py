"""Per-op allocation traces (fp32, CPU, 1 thread unless argv[1]). Each case: forward, then
backward with a pre-allocated ones() gradient; labels: inK = inputs, out, outK = extra outputs,
saved:<Node>.<attr> = saved tensors, gout = incoming grad, X.grad = produced grads."""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F, math
torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
only = sys.argv[2].split(',') if len(sys.argv) > 2 else None
def R(*s, g=True): return torch.randn(*s, requires_grad=g)
def sel(name):
    return only is None or any(o in name for o in only)
def C(title, *a, **k):
    if sel(title): op_case(title, *a, **k)

N, Cc, H, W = 2, 24, 9, 11   # x: 2*24*9*11*4 = 19008 B
# ---------------- BatchNorm2d
bn = nn.BatchNorm2d(Cc)
for mode in ('train', 'eval'):
    bn.train(mode == 'train')
    C(f"BatchNorm2d({Cc}) {mode} x[{N},{Cc},{H},{W}] x.req_grad",
      lambda x: bn(x), [R(N, Cc, H, W)], params=[('W', bn.weight), ('b', bn.bias)],
      cands={'x': N*Cc*H*W*4, 'C': Cc*4})
    C(f"BatchNorm2d({Cc}) {mode} no_grad", lambda x: bn(x), [R(N, Cc, H, W, g=False)], train=False,
      cands={'x': N*Cc*H*W*4, 'C': Cc*4})
bn.train()
C("BatchNorm2d train, x does not require grad (params do)", lambda x: bn(x), [R(N, Cc, H, W, g=False)],
  params=[('W', bn.weight), ('b', bn.bias)], cands={'x': N*Cc*H*W*4, 'C': Cc*4})
# ---------------- ReLU
C("clone -> ReLU(inplace=True)", lambda x: F.relu(x.clone(), inplace=True), [R(N, Cc, H, W)])
C("clone -> ReLU(inplace=False)", lambda x: F.relu(x.clone()), [R(N, Cc, H, W)])
conv = nn.Conv2d(Cc, 40, 3, padding=1, bias=False)
C("conv3x3 -> ReLU(inplace=True)", lambda x: F.relu(conv(x), inplace=True), [R(N, Cc, H, W)], params=[('Wc', conv.weight)])
C("bn(train) -> ReLU(inplace=True)", lambda x: F.relu(bn(x), inplace=True), [R(N, Cc, H, W)], params=[('W', bn.weight), ('b', bn.bias)])
C("bn(train) -> ReLU(inplace=False)", lambda x: F.relu(bn(x)), [R(N, Cc, H, W)], params=[('W', bn.weight), ('b', bn.bias)])
C("clone -> ReLU6(inplace=True) (mobilenet_v2)", lambda x: F.relu6(x.clone(), inplace=True), [R(N, Cc, H, W)])
C("clone -> ReLU6(inplace=False)", lambda x: F.relu6(x.clone()), [R(N, Cc, H, W)])
C("clone -> Hardtanh(-1,1,inplace=False)", lambda x: F.hardtanh(x.clone()), [R(N, Cc, H, W)])
C("ReLU no_grad out-of-place", lambda x: F.relu(x), [R(N, Cc, H, W, g=False)], train=False)
# ---------------- pooling
C("MaxPool2d(3,2,1) x[2,24,13,11] -> [2,24,7,6]", nn.MaxPool2d(3, 2, 1), [R(2, 24, 13, 11)],
  cands={'out': 2*24*7*6*4, 'idx': 2*24*7*6*8})
C("MaxPool2d(3,2,1) no_grad", nn.MaxPool2d(3, 2, 1), [R(2, 24, 13, 11, g=False)], train=False)
C("MaxPool2d(2) x[2,24,13,11] (x no grad)", nn.MaxPool2d(2), [R(2, 24, 13, 11, g=False)], train=True)
C("AvgPool2d(2) x[2,24,13,11] -> [2,24,6,5]", nn.AvgPool2d(2), [R(2, 24, 13, 11)])
for hw in (7, 13):
    for o in ((1, 1), (7, 7)):
        C(f"AdaptiveAvgPool2d({o}) x[2,24,{hw},{hw}]", nn.AdaptiveAvgPool2d(o), [R(2, 24, hw, hw)],
          cands={'in': 2*24*hw*hw*4, 'out': 2*24*o[0]*o[1]*4})
C("AdaptiveAvgPool2d((1,1)) no_grad x[2,24,13,13]", nn.AdaptiveAvgPool2d((1, 1)), [R(2, 24, 13, 13, g=False)], train=False)
# ---------------- flatten
C("clone -> torch.flatten(x,1) contiguous", lambda x: torch.flatten(x.clone(), 1), [R(2, 24, 3, 5)])
C("adaptiveavgpool(1,1) -> flatten(1)", lambda x: torch.flatten(F.adaptive_avg_pool2d(x, 1), 1), [R(2, 24, 7, 7)])
C("flatten of non-contiguous (transpose) -> copies", lambda x: torch.flatten(x.transpose(2, 3), 1), [R(2, 24, 3, 5)])
# ---------------- Linear
lin = nn.Linear(40, 24)
C("Linear(40,24) x[6,40]", lin, [R(6, 40)], params=[('W', lin.weight), ('b', lin.bias)],
  cands={'x': 6*40*4, 'out': 6*24*4, 'W': 24*40*4, 'b': 24*4})
C("Linear(40,24) x[6,40], x no grad", lin, [R(6, 40, g=False)], params=[('W', lin.weight), ('b', lin.bias)])
C("Linear(40,24) x[2,5,40]", lin, [R(2, 5, 40)], params=[('W', lin.weight), ('b', lin.bias)],
  cands={'x': 10*40*4, 'out': 10*24*4, 'W': 24*40*4, 'b': 24*4})
C("Linear(40,24) x[2,5,40] x no grad", lin, [R(2, 5, 40, g=False)], params=[('W', lin.weight), ('b', lin.bias)])
lin_nb = nn.Linear(40, 24, bias=False)
C("Linear(40,24,bias=False) x[6,40]", lin_nb, [R(6, 40)], params=[('W', lin_nb.weight)])
C("Linear(40,24,bias=False) x[2,5,40]", lin_nb, [R(2, 5, 40)], params=[('W', lin_nb.weight)])
C("Linear x[2,5,40] non-contiguous input (transpose of [2,40,5])", lambda x: lin(x.transpose(1, 2)), [R(2, 40, 5)], params=[('W', lin.weight), ('b', lin.bias)])
C("Linear(40,24) no_grad x[2,5,40]", lin, [R(2, 5, 40, g=False)], train=False)
# ---------------- Dropout
for p in (0.5, 0.0):
    d = nn.Dropout(p)
    C(f"clone -> Dropout(p={p}) train", lambda x, d=d: d(x.clone()), [R(2, 24, 7, 5)], cands={'x': 2*24*7*5*4, 'mask_b': 2*24*7*5})
d = nn.Dropout(0.5); 
C("Dropout(0.5) train on leaf", lambda x: d(x), [R(2, 24, 7, 5)])
C("Dropout(0.5) train no_grad", lambda x: d(x), [R(2, 24, 7, 5, g=False)], train=False)
C("Dropout(0.5, inplace=True) train", lambda x: F.dropout(x.clone(), 0.5, True, True), [R(2, 24, 7, 5)])
d.eval()
C("Dropout(0.5) eval", lambda x: d(x), [R(2, 24, 7, 5)])
# ---------------- cat
C("torch.cat([a,b,c],1) a[2,8,5,5] b[2,16,5,5] c[2,24,5,5]", lambda a, b, c: torch.cat([a, b, c], 1),
  [R(2, 8, 5, 5), R(2, 16, 5, 5), R(2, 24, 5, 5)])
C("torch.cat([a,b,c],1) no_grad", lambda a, b, c: torch.cat([a, b, c], 1),
  [R(2, 8, 5, 5, g=False), R(2, 16, 5, 5, g=False), R(2, 24, 5, 5, g=False)], train=False)
# ---------------- elementwise
C("x + y (both req grad)", lambda x, y: x + y, [R(2, 24, 5, 7), R(2, 24, 5, 7)])
C("x + y (broadcast y[24,1,1])", lambda x, y: x + y, [R(2, 24, 5, 7), R(24, 1, 1)])
C("a=x.clone(); a += y  (out += identity)", lambda x, y: x.clone().add_(y), [R(2, 24, 5, 7), R(2, 24, 5, 7)])
C("x * y (both req grad)", lambda x, y: x * y, [R(2, 24, 5, 7), R(2, 24, 5, 7)])
C("x * y (y no grad)", lambda x, y: x * y, [R(2, 24, 5, 7), R(2, 24, 5, 7, g=False)])
C("x * 0.5 (python float)", lambda x: x * 0.5, [R(2, 24, 5, 7)])
C("x / 8.0 (div by python float)", lambda x: x / 8.0, [R(2, 24, 5, 7)])
C("x / y (tensor)", lambda x, y: x / y, [R(2, 24, 5, 7), R(2, 24, 5, 7)])
# ---------------- activations
S = (2, 5, 48)
C("F.gelu exact", lambda x: F.gelu(x), [R(*S)])
C("F.gelu tanh approx", lambda x: F.gelu(x, approximate='tanh'), [R(*S)])
C("NewGELU formula", lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))), [R(*S)])
C("NewGELU formula no_grad", lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))), [R(*S, g=False)], train=False)
C("F.silu", lambda x: F.silu(x), [R(*S)])
C("torch.tanh", lambda x: torch.tanh(x), [R(*S)])
C("softmax(dim=-1)", lambda x: torch.softmax(x, -1), [R(*S)])
C("log_softmax(dim=-1)", lambda x: torch.log_softmax(x, -1), [R(*S)])
C("softmax(dim=1) (non-last dim)", lambda x: torch.softmax(x, 1), [R(*S)])
# ---------------- matmul / bmm
C("q @ k.transpose(-1,-2)  q,k[2,3,5,8]", lambda q, k: q @ k.transpose(-1, -2), [R(2, 3, 5, 8), R(2, 3, 6, 8)],
  cands={'q': 2*3*5*8*4, 'k': 2*3*6*8*4, 'out': 2*3*5*6*4})
C("attn @ v  attn[2,3,5,6] v[2,3,6,8]", lambda a, v: a @ v, [R(2, 3, 5, 6), R(2, 3, 6, 8)])
C("q @ k.T no_grad", lambda q, k: q @ k.transpose(-1, -2), [R(2, 3, 5, 8, g=False), R(2, 3, 6, 8, g=False)], train=False)
C("torch.bmm a[6,5,8] b[6,8,7]", lambda a, b: torch.bmm(a, b), [R(6, 5, 8), R(6, 8, 7)])
C("matmul 3D x 2D  x[2,5,8] @ w[8,7]", lambda a, b: a @ b, [R(2, 5, 8), R(8, 7)])
# ---------------- view / permute / contiguous
C("view/permute/transpose (x[2,5,48] -> view(2,5,3,16).permute(0,2,1,3))", lambda x: x.view(2, 5, 3, 16).permute(0, 2, 1, 3), [R(2, 5, 48)])
C("permute(...).contiguous()", lambda x: x.view(2, 5, 3, 16).permute(0, 2, 1, 3).contiguous(), [R(2, 5, 48)])
C("transpose(1,2).contiguous().view(2,5,48)", lambda x: x.transpose(1, 2).contiguous().view(2, 5, 48), [R(2, 3, 5, 16)])
C("transpose(1,2).reshape(2,5,48)", lambda x: x.transpose(1, 2).reshape(2, 5, 48), [R(2, 3, 5, 16)])
C("contiguous() of contiguous", lambda x: x.contiguous(), [R(2, 5, 48)])
# ---------------- LayerNorm
ln = nn.LayerNorm(48)
C("LayerNorm(48) x[2,5,48]", ln, [R(2, 5, 48)], params=[('W', ln.weight), ('b', ln.bias)],
  cands={'x': 2*5*48*4, 'rows': 10*4})
C("LayerNorm(48) no_grad", ln, [R(2, 5, 48, g=False)], train=False)
C("LayerNorm(48) x no grad", ln, [R(2, 5, 48, g=False)], params=[('W', ln.weight), ('b', ln.bias)])
# ---------------- Embedding
emb = nn.Embedding(50, 48)
ids = torch.randint(0, 50, (2, 5))
C("Embedding(50,48) ids[2,5] int64", emb, [ids], params=[('W', emb.weight)],
  cands={'table': 50*48*4, 'out': 10*48*4})
ids_rep = torch.tensor([[1, 1, 2, 3, 1], [4, 4, 4, 5, 2]])
C("Embedding(50,48) ids with repeats", emb, [ids_rep], params=[('W', emb.weight)])
C("Embedding no_grad", emb, [ids], train=False)
# ---------------- where
mask = torch.rand(2, 3, 5, 6) > 0.5
C("torch.where(mask, x, -inf tensor scalar)", lambda x: torch.where(mask, x, torch.tensor(-1e9)), [R(2, 3, 5, 6)])
C("torch.where(mask, x, y)", lambda x, y: torch.where(mask, x, y), [R(2, 3, 5, 6), R(2, 3, 5, 6)])
C("x.masked_fill(mask, -1e9)", lambda x: x.masked_fill(mask, -1e9), [R(2, 3, 5, 6)])
# ---------------- RMSNorm
rw = nn.Parameter(torch.ones(48))
def rms(x):
    var = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + 1e-6)
    return rw * x
C("RMSNorm formula x[2,5,48]", rms, [R(2, 5, 48)], params=[('w', rw)], cands={'x': 2*5*48*4, 'rows': 10*4})
C("RMSNorm formula no_grad", rms, [R(2, 5, 48, g=False)], train=False)
# ---------------- losses
ce = nn.CrossEntropyLoss()
C("CrossEntropyLoss logits[6,10] target int64[6]", lambda x, t: ce(x, t), [R(6, 10), torch.randint(0, 10, (6,))],
  cands={'logits': 240, 'rows': 24})
C("CrossEntropyLoss LM logits[2*7=14,50] targets[14]", lambda x, t: ce(x, t), [R(14, 50), torch.randint(0, 50, (14,))],
  cands={'logits': 14*50*4, 'rows': 14*4})
C("CrossEntropyLoss with ignore_index targets(-100)", lambda x, t: ce(x, t), [R(14, 50), torch.tensor([-100]*3 + list(range(11)))])
C("HF LM loss: logits[2,8,50][:, :-1].contiguous().view(-1,50), labels[:,1:]",
  lambda x, t: ce(x[:, :-1, :].contiguous().view(-1, 50), t[:, 1:].contiguous().view(-1)),
  [R(2, 8, 50), torch.randint(0, 50, (2, 8))], cands={'full': 2*8*50*4, 'shift': 2*7*50*4})
C("MSELoss x[6,10] y[6,10]", lambda x, y: F.mse_loss(x, y), [R(6, 10), torch.randn(6, 10)])
C("slice logits[:, :-1, :] (view) only", lambda x: x[:, :-1, :], [R(2, 8, 50)])
C("slice logits[:, :-1, :].contiguous()", lambda x: x[:, :-1, :].contiguous(), [R(2, 8, 50)])
C("sum() of [2,5,48]", lambda x: x.sum(), [R(2, 5, 48)])
C("mean() of [2,5,48]", lambda x: x.mean(), [R(2, 5, 48)])
