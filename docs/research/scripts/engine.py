"""Autograd engine facts on 1.13 CPU: InputBuffer accumulation, AccumulateGrad stealing,
node order, grad seed, step1 vs step2 (zero_grad set_to_none True/False)."""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)

def show(title, fn, setup=None, cands=None, warm=1):
    header(title)
    for _ in range(warm):
        if setup: setup()
        fn()
    if setup: setup()
    tr, _ = trace(fn, warmup=0)
    for e in tr.events:
        e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path']]
    tr.table(cands=cands)
    return tr

S = (2, 24, 5, 7)   # 6720 B
x = torch.randn(*S, requires_grad=True)
w1 = torch.randn(*S); w2 = torch.randn(*S)

def clear():
    x.grad = None

# (1) InputBuffer: y feeds two muls; grads from two MulBackward0 must be summed
def f1():
    mark('x', x)
    with phase('fwd'):
        y = x.clone(); mark('y', y)
        a = y * w1; b = y * w2
        loss = (a * b).sum()   # MulBackward0(a*b) gives fresh grads
    with phase('bwd'):
        loss.backward()
    mark('x.grad', x.grad)
show("(1) InputBuffer: y=x.clone(); a=y*w1; b=y*w2; loss=(a*b).sum()", f1, clear, {'S': 6720})

# (1b) first incoming grad is shared (AddBackward passes the same tensor to both inputs)
def f1b():
    mark('x', x)
    with phase('fwd'):
        y = x.clone()
        a = y * w1
        out = y + a       # AddBackward0 passes g to y and to a
        loss = (out * w2).sum()
    with phase('bwd'):
        loss.backward()
    mark('x.grad', x.grad)
show("(1b) InputBuffer with pass-through grad: y=x.clone(); out=y + y*w1; loss=(out*w2).sum()", f1b, clear, {'S': 6720})

# (1c) same, create_graph=False but grads from 3 consumers
def f1c():
    with phase('fwd'):
        y = x.clone()
        loss = ((y * w1) * (y * w2) * (y * 2.0)).sum()
    with phase('bwd'):
        loss.backward()
show("(1c) three consumers of y", f1c, clear, {'S': 6720})

# (2) AccumulateGrad stealing
lin = nn.Linear(40, 24)
xi = torch.randn(6, 40, requires_grad=True)
def clear2():
    lin.zero_grad(set_to_none=True); xi.grad = None
def f2():
    mark('W', lin.weight); mark('b', lin.bias); mark('xi', xi)
    with phase('fwd'):
        out = lin(xi)
        loss = (out * out).sum()
    with phase('bwd'):
        loss.backward()
    mark('W.grad', lin.weight.grad); mark('b.grad', lin.bias.grad); mark('xi.grad', xi.grad)
show("(2) AccumulateGrad steal: Linear(40,24) x[6,40] leaf, loss=(out*out).sum()", f2, clear2,
     {'out': 576, 'W': 3840, 'b': 96, 'x': 960})
# (2b) second backward without zeroing: accumulate into existing .grad
def f2b():
    with phase('fwd'):
        out = lin(xi); loss = (out * out).sum()
    with phase('bwd'):
        loss.backward()
def setup2b():
    clear2()
    lin(xi).pow(2).sum().backward()   # grads exist now
show("(2b) AccumulateGrad when .grad already exists (no zero_grad)", f2b, setup2b, {'out': 576, 'W': 3840, 'b': 96, 'x': 960})
def setup2c():
    setup2b(); lin.zero_grad(set_to_none=False); xi.grad.zero_()
show("(2c) AccumulateGrad after zero_grad(set_to_none=False)", f2b, setup2c, {'out': 576, 'W': 3840, 'b': 96, 'x': 960})
# (2d) grad is a pass-through of another node's input (sum -> expand) and leaf used twice
def f2d():
    with phase('fwd'):
        loss = (x.sum() + (x * w1).sum())
    with phase('bwd'):
        loss.backward()
show("(2d) leaf x used by sum() (expanded grad) and x*w1 (fresh grad)", f2d, clear, {'S': 6720})

# (5) seed: loss.backward() allocates ones_like(loss)
def f5():
    with phase('fwd'):
        loss = (x * w1).sum()
    with phase('bwd'):
        loss.backward()
    with phase('after'):
        del loss
show("(5) grad seed: loss=(x*w1).sum(); loss.backward()", f5, clear, {'S': 6720})

# (3) order of nodes in a residual block + (4) buffer freeing
import torchvision
blk = torchvision.models.resnet.BasicBlock(16, 16)
blk.train()
xb = torch.randn(2, 16, 8, 8, requires_grad=True)
def clear3():
    blk.zero_grad(set_to_none=True); xb.grad = None
def f3():
    with phase('fwd'):
        out = blk(xb)
        loss = out.sum()
    with phase('bwd'):
        loss.backward()
header("(3) node execution order, torchvision BasicBlock(16,16) training, loss=out.sum()")
clear3(); f3(); clear3()
with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
    f3()
for e in prof.profiler.kineto_results.experimental_event_tree():
    pass
evs = [e for e in prof.events() if e.name.startswith('autograd::engine::evaluate_function')]
fw = [e for e in prof.events() if e.sequence_nr >= 0 and not e.name.startswith('autograd') and e.cpu_parent is None]
print("  forward ops with sequence numbers:", [(e.name, e.sequence_nr) for e in fw])
print("  backward node order:", [(e.name.replace('autograd::engine::evaluate_function: ', ''), e.sequence_nr) for e in evs])

# (2e) AddBackward0 gives the same grad tensor to two leaves: first AccumulateGrad must copy, second steals
y = torch.randn(*S, requires_grad=True)
def clear2e():
    x.grad = None; y.grad = None
def f2e():
    mark('x', x); mark('y', y)
    with phase('fwd'):
        loss = ((x + y) * w1).sum()
    with phase('bwd'):
        loss.backward()
    mark('x.grad', x.grad); mark('y.grad', y.grad)
show("(2e) loss=((x+y)*w1).sum(): one fresh grad shared by two leaves", f2e, clear2e, {'S': 6720})
