"""Full training iterations (fwd, CE loss, backward, Adam step, zero_grad) for 3 steps,
zero_grad(set_to_none=True) vs False (1.13 default is False)."""
import sys, inspect; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
print('Optimizer.zero_grad signature:', inspect.signature(torch.optim.Optimizer.zero_grad))
print('nn.Module.zero_grad signature:', inspect.signature(nn.Module.zero_grad))
for stn in (True, False):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 10))
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    x = torch.randn(6, 40); t = torch.randint(0, 10, (6,))
    names = ['W1', 'b1', 'W2', 'b2']
    # warm-up a throwaway copy so one-time allocations are not in the trace
    m0 = nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 10)); o0 = torch.optim.Adam(m0.parameters())
    for _ in range(2):
        F.cross_entropy(m0(x), t).backward(); o0.step(); o0.zero_grad(set_to_none=stn)
    def fn():
        for it in (1, 2, 3):
            for n, p in zip(names, m.parameters()):
                mark(n, p)
            with phase(f'it{it}.fwd'):
                loss = F.cross_entropy(m(x), t)
            with phase(f'it{it}.bwd'):
                loss.backward()
            for n, p in zip(names, m.parameters()):
                mark(n + '.grad', p.grad)
            with phase(f'it{it}.step'):
                opt.step()
            for n, p in zip(names, m.parameters()):
                for k, v in opt.state[p].items():
                    mark(f'{n}.{k}', v)
            with phase(f'it{it}.zero'):
                opt.zero_grad(set_to_none=stn)
            with phase(f'it{it}.delloss'):
                del loss
    tr, _ = trace(fn, warmup=0)
    for e in tr.events:
        e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path']][-2:]
    header(f"MLP Linear(40,24)-ReLU-Linear(24,10), x[6,40], CE, Adam, zero_grad(set_to_none={stn})")
    tr.table(min_bytes=13)
