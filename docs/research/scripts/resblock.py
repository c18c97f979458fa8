"""torchvision resnet18 BasicBlocks: training fwd+bwd and no_grad inference traces (1 thread)."""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torchvision
torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
m = torchvision.models.resnet18()
def c16(c): return (c + 15) // 16 * 16

def run(title, blk, x, train=True):
    blk.train(train)
    named = dict(blk.named_parameters())
    def setup():
        blk.zero_grad(set_to_none=True)
    def fn():
        for n, p in named.items(): mark(n, p)
        mark('x', x)
        if train:
            with phase('fwd'):
                out = blk(x)
            mark('out', out)
            mark_graph(out)
            with phase('bwd'):
                out.sum().backward()
            for n, p in named.items(): mark(n + '.grad', p.grad)
        else:
            with torch.no_grad():
                with phase('fwd'):
                    out = blk(x)
            mark('out', out)
        with phase('del'):
            del out
    for _ in range(2):
        setup(); fn()
    setup()
    tr, _ = trace(fn, warmup=0)
    for e in tr.events:
        e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path'] if p not in ('aten::conv2d', 'aten::convolution', 'aten::_convolution', 'aten::batch_norm', 'aten::_batch_norm_impl_index')]
    header(title)
    tr.table()
    return tr

x = torch.randn(2, 64, 8, 8)   # 16384 B; layer1 block keeps shape
run("resnet18.layer1[0] BasicBlock(64) train, x[2,64,8,8] (x.requires_grad=False)", m.layer1[0], x)
run("resnet18.layer1[0] BasicBlock(64) no_grad eval, x[2,64,8,8]", m.layer1[0], x, train=False)
run("resnet18.layer2[0] BasicBlock(64->128,s2,downsample) train, x[2,64,8,8]", m.layer2[0], x)
run("resnet18.layer2[0] no_grad eval", m.layer2[0], x, train=False)

# block input requires grad (as inside a network): x = relu(x0) so the identity grad must be
# accumulated with conv1's grad_input in the InputBuffer of ReluBackward0
x0 = torch.randn(2, 64, 8, 8, requires_grad=True)
blk = m.layer1[1]; blk.train()
named = dict(blk.named_parameters())
def setup():
    blk.zero_grad(set_to_none=True); x0.grad = None
def fn():
    mark('x0', x0)
    with phase('fwd'):
        xin = torch.relu(x0); mark('xin=relu(x0)', xin)
        out = blk(xin)
        loss = out.sum()
    with phase('bwd'):
        loss.backward()
    mark('x0.grad', x0.grad)
for _ in range(2): setup(); fn()
setup()
tr, _ = trace(fn, warmup=0)
for e in tr.events:
    e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path'] if p not in ('aten::conv2d', 'aten::convolution', 'aten::_convolution', 'aten::batch_norm', 'aten::_batch_norm_impl_index')][-3:]
header("resnet18.layer1[1] train with block input requiring grad (xin = relu(x0)); only backward shown >=16384 B")
tr.events = [e for e in tr.events]
tr.table(min_bytes=16384)
