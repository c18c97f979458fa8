"""HF-style self-attention (GPT2/BERT pattern) training trace: where copies appear (view/transpose/contiguous grads)."""
import sys, math; sys.path.insert(0, __file__.rsplit('/', 1)[0])
from tracelib import *
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(1)
B, S, D, H = 2, 5, 48, 3; hd = D // H
q_l, k_l, v_l, o_l = (nn.Linear(D, D) for _ in range(4))
ps = [p for l in (q_l, k_l, v_l, o_l) for p in l.parameters()]
x0 = torch.randn(B, S, D, requires_grad=True)
def setup():
    for p in ps: p.grad = None
    x0.grad = None
def fn():
    with phase('fwd'):
        x = x0 * 1.0; mark('x', x)
        def heads(t): return t.view(B, S, H, hd).transpose(1, 2)
        q = heads(q_l(x)); k = heads(k_l(x)); v = heads(v_l(x))
        mark('q', q); mark('k', k); mark('v', v)
        s = q @ k.transpose(-1, -2); mark('scores', s)
        s = s / math.sqrt(hd); mark('scores/8', s)
        p = torch.softmax(s, -1); mark('probs', p)
        a = p @ v; mark('attn', a)
        a = a.transpose(1, 2).contiguous().view(B, S, D); mark('merged', a)
        out = o_l(a); mark('out', out)
        loss = out.sum()
    with phase('bwd'):
        loss.backward()
for _ in range(2): setup(); fn()
setup()
tr, _ = trace(fn, warmup=0)
for e in tr.events:
    e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path']][-3:]
header(f"attention B={B} S={S} D={D} H={H}: [B,S,D]=1920 B, scores [B,H,S,S]=600 B, W=9216 B (events >= 192 B)")
tr.table(min_bytes=192)
