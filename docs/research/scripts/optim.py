"""torch.optim step allocations (1.13, CPU): SGD, SGD(momentum), Adam, AdamW x foreach False/True/None.
Params: W1[24,40]=3840B, b1[24]=96B, W2[10,24]=960B, b2[10]=40B (total 4936B)."""
import sys; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, inspect
torch.manual_seed(0)
torch.set_num_threads(1)

def make():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 10))
    for p in m.parameters():
        p.grad = torch.randn_like(p)
    return m
names = ['W1', 'b1', 'W2', 'b2']
cands = {'W1': 3840, 'b1': 96, 'W2': 960, 'b2': 40, 'step(f32 scalar)': 4}

def run(title, ctor):
    # throwaway warm-up of the same optimizer type (lazy imports / one-time allocs)
    m0 = make(); o0 = ctor(m0.parameters()); o0.step(); o0.step()
    m = make(); opt = ctor(m.parameters())
    ps = list(m.parameters())
    for k in (1, 2, 3):
        def fn():
            for n, p in zip(names, ps):
                mark(n, p); mark(n + '.grad', p.grad)
            for n, p in zip(names, ps):
                for sk, sv in opt.state[p].items():
                    if isinstance(sv, torch.Tensor):
                        mark(f'{n}.{sk}', sv)
            with phase(f'step{k}'):
                opt.step()
            for n, p in zip(names, ps):
                for sk, sv in opt.state[p].items():
                    if isinstance(sv, torch.Tensor):
                        mark(f'{n}.{sk}', sv)
        tr, _ = trace(fn, warmup=0)
        header(f"{title} -- step {k}")
        if k == 1:
            st = {sk: (tuple(sv.shape), str(sv.dtype)) if isinstance(sv, torch.Tensor) else type(sv).__name__
                  for sk, sv in opt.state[ps[0]].items()}
            print('  state per param after step 1:', st, ' defaults foreach =', opt.defaults.get('foreach'))
        tr.table(cands=cands, show_scope=True)

lr = 0.01
for fe in (False, True, None):
    run(f"SGD(lr=0.01, foreach={fe})", lambda ps: torch.optim.SGD(ps, lr=lr, foreach=fe))
    run(f"SGD(lr=0.01, momentum=0.9, foreach={fe})", lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9, foreach=fe))
    run(f"Adam(lr=0.01, foreach={fe})", lambda ps: torch.optim.Adam(ps, lr=lr, foreach=fe))
    run(f"AdamW(lr=0.01, foreach={fe})", lambda ps: torch.optim.AdamW(ps, lr=lr, foreach=fe))
run("SGD(lr=0.01, momentum=0.9, weight_decay=1e-4, foreach=False)", lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9, weight_decay=1e-4, foreach=False))
run("SGD(lr=0.01, momentum=0.9, weight_decay=1e-4, foreach=True)", lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9, weight_decay=1e-4, foreach=True))
run("Adam(lr=0.01, weight_decay=1e-4, foreach=False)", lambda ps: torch.optim.Adam(ps, lr=lr, weight_decay=1e-4, foreach=False))
run("Adam(lr=0.01, amsgrad=True, foreach=False)", lambda ps: torch.optim.Adam(ps, lr=lr, amsgrad=True, foreach=False))
