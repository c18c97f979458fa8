"""Capture rules for torchvision 0.14's transformer classifiers (vit_*, swin_*, swin_v2_*, maxvit_t):
nn.MultiheadAttention, indexing, window shifts, cosine attention and einsum. Registered into
lower.py's _RULES on import.

Each rule writes what PyTorch 1.13 allocates and what autograd saves for the call, with existing IR
ops where one has the same allocation and saved-tensor behaviour (the comment at each rule names
the PyTorch function it follows). Invariants: a form a rule does not map is a headroom.Error naming
the call and its module; nothing is guessed from a name alone.
"""
import math

from ._native import Error
from .lower import _RULES, _Args, _factory, _is_scalar


def _where(c):
    return f" in module '{c.module}'" if c.module else ""


def _shape(L, ref):
    return L.t.tensors[ref.tid].shape


def _untracked(L, ref):
    """True when autograd never tracks the tensor: a factory's output, a buffer, an input, or made
    only from such tensors (swin's shift mask, maxvit's flattened position index)."""
    memo = L.__dict__.setdefault("_attn_untracked", {})
    todo = [ref.tid]
    while todo:
        tid = todo[-1]
        if tid in memo:
            todo.pop()
            continue
        info = L.t.tensors[tid]
        if tid in L.untracked or info.role in ("buffer", "input", "target"):
            memo[tid] = True
        elif info.role in ("parameter", "frozen") or info.producer is None:
            memo[tid] = info.role == "frozen"
        else:
            call = L.t.calls[info.producer]
            deps = [r.tid for r in _refs(call.args) + _refs(call.kwargs)]
            pending = [d for d in deps if d not in memo]
            if pending:
                todo.extend(pending)
                continue
            memo[tid] = all(memo[d] for d in deps)
        todo.pop()
    return memo[ref.tid]


def _refs(x):
    from .recorder import Ref
    if isinstance(x, Ref):
        return [x]
    if isinstance(x, (list, tuple)):
        return [r for v in x for r in _refs(v)]
    if isinstance(x, dict):
        return _refs(list(x.values()))
    return []


def _same_shape_copy(L, name, x):
    """A new tensor of x's shape whose forward saves nothing and whose backward passes the gradient
    through (Tensor.clone): AddScalar of 0 has exactly that allocation and autograd behaviour."""
    return L.b.add_scalar(name, x, 0.0)


# --- ViT: class token, indexing ------------------------------------------------------------------
def _expand(L, c):
    # Tensor.expand: a view (class_token.expand(n, -1, -1)); the recorded output gives the -1 sizes.
    L._set(c, L.b.expand(L._name(c, "expand"), L.T(c.args[0]), list(_shape(L, Ref_of(c)))))


def Ref_of(c, i=0):
    from .recorder import Ref
    return Ref(c.outputs[i])


def _getitem(L, c):
    from .recorder import Ref
    x, index = c.args[0], c.args[1]
    name = L._name(c, "getitem")
    if isinstance(index, Ref):
        # table[index] with a 1-D integer index into a 2-D tensor: a gather into a new tensor whose
        # backward (index_backward: zeros_like(table).index_put_(index, grad, accumulate=True))
        # saves only the index and makes one dense gradient of the table, as embedding does.
        xs, ix = _shape(L, x), L.t.tensors[index.tid]
        if _untracked(L, x):
            L._set(c, L.b.index(name, L.T(x), L.T(index)))
            return
        if len(xs) != 2 or len(ix.shape) != 1 or ix.dtype not in ("int64", "int32") or not _untracked(L, index):
            raise Error(f"capture: indexing a tensor with a tensor{_where(c)} is only mapped for a "
                        "2-D table and a 1-D integer index")
        L._set(c, L.b.embedding(name, L.T(index), L.T(x)))
        return
    items = list(index) if isinstance(index, tuple) else [index]
    shape = list(_shape(L, x))
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise Error(f"capture: indexing with two ellipses{_where(c)}")
    if Ellipsis in items:
        k = items.index(Ellipsis)
        used = sum(1 for i in items if i is not Ellipsis and i is not None)
        items = items[:k] + [slice(None)] * (len(shape) - used) + items[k + 1:]
    t = L.T(x)
    dim = 0
    for it in items:
        if it is None:
            t = L.b.unsqueeze(name, t, dim)
            dim += 1
        elif isinstance(it, bool) or not isinstance(it, (int, slice)):
            raise Error(f"capture: indexing with {it!r}{_where(c)} is not mapped")
        elif isinstance(it, int):
            t = L.b.select(name, t, dim, it)
        else:
            size = L.b.shape(t)[dim]
            start, stop, step = it.indices(size)
            if (start, stop, step) != (0, size, 1):
                t = L.b.slice(name, t, dim, start, max(stop, start), step)
            dim += 1
    L._set(c, t)


# --- nn.MultiheadAttention ----------------------------------------------------------------------
_MHA_ARGS = ["query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias",
             "bias_k", "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias", "training",
             "key_padding_mask", "need_weights", "attn_mask", "use_separate_proj_weight"]


def _batch_first_source(L, c, q):
    """The [B, S, D] tensor that MultiheadAttention(batch_first=True) transposed into `q`, or None.
    The transpose is the module's own (MultiheadAttention.forward, in the same module scope as the
    call): a caller's transpose into a sequence-first module does not count."""
    info = L.t.tensors[q.tid]
    if info.producer is None:
        return None
    call = L.t.calls[info.producer]
    if call.name != "transpose" or call.module != c.module:
        return None
    a = _Args(call, ["input", "dim0", "dim1"])
    return a("input") if sorted((a("dim0"), a("dim1"))) == [0, 1] else None


def _multi_head_attention(L, c):
    a = _Args(c, _MHA_ARGS)
    q, k, v = a("query"), a("key"), a("value")
    if (q.tid != k.tid or k.tid != v.tid or a("bias_k") is not None or a("bias_v") is not None
            or a("add_zero_attn", False) or a("use_separate_proj_weight", False) or a("in_proj_bias") is None
            or a("key_padding_mask") is not None or a("attn_mask") is not None or len(_shape(L, q)) != 3):
        raise Error(f"capture: multi_head_attention_forward{_where(c)} is mapped for batched self-attention "
                    "with a packed in-projection and bias, no masks, no bias_k/bias_v, no add_zero_attn")
    heads, training, p = a("num_heads"), bool(a("training", True)), float(a("dropout_p", 0.0))
    source = _batch_first_source(L, c, q)
    # MultiheadAttention.forward (torch/nn/modules/activation.py) takes the fused
    # torch._native_multi_head_attention when, among others, the module is in eval mode, grad is
    # off (headroom's inference), batch_first, self-attention, dropout 0 and an even head count.
    # Capture itself never takes it (meta tensors and the recording mode both rule it out), so
    # the recorded call is the Python one: the rule writes the path a real run takes.
    # A capture in mode='infer' has no loss: its real run is the forward under torch.no_grad().
    fused = L.t.loss is None and not training and source is not None and p == 0.0 and heads % 2 == 0
    if fused:
        if a("need_weights", True):
            raise Error(f"capture: the fused attention with need_weights=True{_where(c)} is not mapped")
        out = _attention_fused(L, c, L.T(source), heads, a)
        L._set(c, L.b.transpose(L._name(c, "out.transpose"), out, 0, 1))
    else:
        L._set(c, _attention_python(L, c, L.T(q), heads, a, p if training else 0.0))
    if len(c.outputs) != 1:  # need_weights=True: the averaged weights are a second output
        raise Error(f"capture: multi_head_attention_forward with need_weights=True{_where(c)} is not mapped")


def _hold_to_end(L, tensors):
    last = L.b.op_count() - 1
    for t in tensors:
        L.b.hold_until(t, last)


def _attention_python(L, c, query, heads, a, p):
    """F.multi_head_attention_forward (torch 1.13) on query [S, B, D], key is value is query."""
    b, n = L.b, lambda s: L._name(c, s)
    S, B, D = b.shape(query)
    hd = D // heads
    w, bias = L.T(a("in_proj_weight")), L.T(a("in_proj_bias"))
    # _in_projection_packed: linear(q, w, b).chunk(3, -1). at::linear of a 3-D input that is not
    # contiguous (the batch-first transpose) runs matmul on a contiguous copy, then adds the bias
    # out of place.
    qc = b.contiguous(n("in_proj.contiguous"), query)
    proj = b.linear(n("in_proj"), b.view(n("in_proj.view"), qc, [S * B, D]), w, -1)
    proj = b.add(n("in_proj.add"), b.view(n("in_proj.view"), proj, [S, B, 3 * D]), bias)
    locals_ = [query]
    qkv = []
    for i, piece in enumerate(b.chunk(n("chunk"), proj, 3, -1)):
        # q = q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
        t = b.contiguous(n("qkv%d.contiguous" % i), piece)
        t = b.transpose(n("qkv%d.transpose" % i), b.view(n("qkv%d.view" % i), t, [S, B * heads, hd]), 0, 1)
        qkv.append(t)
        locals_.append(t)
    q_scaled = b.div_scalar(n("q_scaled"), qkv[0], math.sqrt(hd))
    scores = b.matmul(n("bmm"), q_scaled, b.transpose(n("k.transpose"), qkv[1], -2, -1))
    weights = b.softmax(n("softmax"), scores, -1)
    if p > 0.0 and L.dropout:
        weights = b.dropout(n("dropout"), weights, p)
    locals_ += [q_scaled, weights]
    out = b.matmul(n("bmm"), weights, qkv[2])
    out = b.contiguous(n("out.contiguous"), b.transpose(n("out.transpose"), out, 0, 1))
    out = b.linear(n("out_proj"), b.view(n("out.view"), out, [S * B, D]), L.T(a("out_proj_weight")),
                   L.opt(a("out_proj_bias")))
    out = b.view(n("out_proj.view"), out, [S, B, D])
    _hold_to_end(L, locals_)  # the function's locals live until it returns
    return out


def _attention_fused(L, c, x, heads, a):
    """torch._native_multi_head_attention (eval, no grad) on x [B, S, D], as observed on torch 1.13
    (CPU profiler, src/frontends/zoo/vit.cc): mm -> qkv [B*S, 3D]; _transform_bias_rescale_qkv
    packs q/k/v into a new [3, B, H, S, hd] and frees qkv; bmm -> scores; softmax; bmm; the
    heads permuted back into [B, S, D]; out_proj addmm; the packed q/k/v freed on return."""
    b, n = L.b, lambda s: L._name(c, s)
    B, S, D = b.shape(x)
    hd = D // heads
    qkv = b.linear(n("in_proj"), b.view(n("in_proj.view"), x, [B * S, D]), L.T(a("in_proj_weight")),
                   L.T(a("in_proj_bias")))
    packed = b.permute(n("qkv.permute"), b.view(n("qkv.view"), qkv, [B, S, 3, heads, hd]), [2, 0, 3, 1, 4])
    packed = b.contiguous(n("transform_bias_rescale_qkv"), packed)
    q, k, v = (b.view(n("qkv%d.view" % i), b.select(n("qkv%d" % i), packed, 0, i), [B * heads, S, hd])
               for i in range(3))
    scores = b.matmul(n("bmm"), q, b.transpose(n("k.transpose"), k, 1, 2))
    # The kernel's softmax is in place and its second bmm writes into q's storage; the IR allocates
    # both ([B*H, S, S] over during the softmax, [B, S, D] until the permute copy), as the
    # built-in vit does (docs/accuracy.md: +0.03% on vit_b_16 inference).
    weights = b.softmax(n("softmax"), scores, -1)
    out = b.view(n("out.view"), b.matmul(n("bmm"), weights, v), [B, heads, S, hd])
    out = b.contiguous(n("out.contiguous"), b.permute(n("out.permute"), out, [0, 2, 1, 3]))
    out = b.linear(n("out_proj"), b.view(n("out.view"), out, [B * S, D]), L.T(a("out_proj_weight")),
                   L.opt(a("out_proj_bias")))
    out = b.view(n("out_proj.view"), out, [B, S, D])
    _hold_to_end(L, [packed])
    return out


# --- Swin: window shifts, padding, the shift mask, cosine attention -------------------------------
def _pad(L, c):
    a = _Args(c, ["input", "pad", "mode", "value"])
    pad = [int(p) for p in a("pad")]
    if a("mode", "constant") != "constant" or any(p < 0 for p in pad):
        raise Error(f"capture: F.pad{_where(c)} is mapped for constant padding of at least 0, got pad {pad} "
                    f"mode '{a('mode', 'constant')}'")
    # constant_pad_nd: a new tensor, also with nothing to pad (torch 1.13 clones then: the output
    # never shares the input's storage); its backward narrows and clones the gradient.
    L._set(c, L.b.pad(L._name(c, "pad"), L.T(a("input")), pad))


def _roll(L, c):
    # torch.roll: a new tensor; its backward rolls the gradient back into a new one. Over several
    # dims PyTorch 1.13 rolls one dim at a time (roll_common: roll(roll(x, s0, d0), s1, d1)), so
    # each extra dim is one more tensor, alive until the next roll is done (measured: swin's
    # two-dim shift allocates two outputs), in the backward too.
    a = _Args(c, ["input", "shifts", "dims"])
    dims = a("dims")
    n = len(dims) if isinstance(dims, (list, tuple)) else 1
    t = L.T(a("input"))
    for _ in range(max(n, 1)):
        t = L.b.roll(L._name(c, "roll"), t)
    L._set(c, t)


def _clone(L, c):
    if c.kwargs.get("memory_format") not in (None, "preserve_format", "contiguous_format"):
        raise Error(f"capture: clone with memory_format{_where(c)} is not mapped")
    # Tensor.clone: a new tensor; CloneBackward0 passes the gradient through.
    L._set(c, _same_shape_copy(L, L._name(c, "clone"), L.T(c.args[0])))


def _compare(L, c):
    # attn_mask != 0 on swin's shift mask, made from new_zeros: a bool tensor, never tracked (a
    # comparison has no gradient; a tracked operand is refused, its lifetime would be unmodelled).
    x, y = c.args[0], c.args[1] if len(c.args) > 1 else c.kwargs.get("other")
    if not _untracked(L, x) or (not _is_scalar(y) and not _untracked(L, y)):
        raise Error(f"capture: {c.name} of a tensor autograd tracks{_where(c)} is not mapped")
    X = L.T(x)
    # A comparison with a number allocates the same bool tensor as one with x itself.
    L._set(c, L.b.compare(L._name(c, c.name), X, X if _is_scalar(y) else L.T(y)))


def _masked_fill(L, c):
    a = _Args(c, ["input", "mask", "value"])
    x, value = a("input"), a("value")
    if not _untracked(L, x) or not _is_scalar(value):
        raise Error(f"capture: masked_fill of a tensor autograd tracks or with a tensor value{_where(c)} is not mapped")
    L._set(c, L.b.masked_fill(L._name(c, "masked_fill"), L.T(x), L.T(a("mask")), float(value)))


_inplace_on_factory = _RULES["zero_"]


def _zero_(L, c):
    # swin_v2: qkv_bias = qkv_bias.clone(); qkv_bias[length:2 * length].zero_(): an in-place write
    # into a slice of the clone (autograd's CopySlices saves nothing of size).
    if c.inplace_of is not None and c.inplace_of not in L.untracked and L.t.tensors[c.inplace_of].role == "activation":
        L._alias(c, c.args[0])
        return
    _inplace_on_factory(L, c)


def _normalize(L, c):
    a = _Args(c, ["input", "p", "dim", "eps"])
    if float(a("p", 2.0)) != 2.0:
        raise Error(f"capture: F.normalize with p={a('p')}{_where(c)} is not mapped")
    # F.normalize: input / input.norm(2, dim, keepdim=True).clamp_min(eps).expand_as(input).
    # norm makes a small [..., 1] tensor (autograd saves input and result), clamp_min another (saves
    # its input), div the full-size output (saves both operands). Mean (a new reduced tensor, saves
    # nothing), an elementwise opaque op keeping its input (clamp_min) and Div write the same
    # allocations and saves.
    x = L.T(a("input"))
    name = L._name(c, "normalize")
    norm = L.b.mean_dims(name + ".norm", x, [a("dim", 1)], True)
    denom = L.b.elementwise_opaque(name + ".clamp_min", norm, False)
    L._set(c, _in_recorded_layout(L, c, name, lambda p: L.b.div(name, p(x), p(denom))))


def _in_recorded_layout(L, c, name, compute):
    """An elementwise result in the layout PyTorch gives it: TensorIterator lays the output out in
    its input's dimension order, so the quotient of swin_v2's permuted q is not contiguous and the
    matmul after it copies it (measured). The recorded meta output has those strides: when they
    are a permutation of a contiguous layout, the op is written on the inputs permuted into that
    order (views), and its output permuted back (a view)."""
    info = L.t.tensors[c.outputs[0]]
    shape, stride = info.shape, getattr(info, "stride", None)
    order = sorted(range(len(shape)), key=lambda d: -stride[d]) if stride else list(range(len(shape)))
    expected, dense = 1, True
    for d in reversed(order):
        if shape[d] != 1 and stride[d] != expected:
            dense = False
        expected *= shape[d]
    moved = [d for d in order if shape[d] != 1]
    if moved == sorted(moved) or not dense:
        return compute(lambda t: t)
    out = compute(lambda t: L.b.permute(name + ".layout", t, order))
    inverse = [order.index(d) for d in range(len(order))]
    return L.b.permute(name + ".layout", out, inverse)


def _clamp(L, c):
    # torch.clamp: a new tensor; ClampBackward1 saves self (the mask comes from it): an elementwise
    # opaque op that keeps its input.
    L._set(c, L.b.elementwise_opaque(L._name(c, "clamp"), L.T(c.args[0]), False))


def _exp(L, c):
    # torch.exp: a new tensor; ExpBackward0 saves its result: sigmoid's rule.
    L._set(c, L.b.sigmoid(L._name(c, "exp"), L.T(c.args[0])))


# --- MaxViT: einsum, swapaxes --------------------------------------------------------------------
def _einsum(L, c):
    """torch.einsum of two operands that is a batched matrix product over shared leading indices:
    "...ik,...jk->...ij" (a @ b^T) or "...ik,...kj->...ij" (a @ b). PyTorch 1.13 (sumproduct_pair in
    aten/src/ATen/native/Linear.cpp) permutes each operand and reshapes it to [batch, rows, k],
    which copies an operand whose layout cannot be viewed so, and runs bmm (saving what it
    multiplies): the IR's MatMul rule, which copies non-contiguous operands and saves the copies."""
    eq = c.args[0] if isinstance(c.args[0], str) else None
    ops = list(c.args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    if eq is None or len(ops) != 2 or "->" not in eq:
        raise Error(f"capture: einsum{_where(c)} is mapped for two operands with an explicit '->'")
    lhs, out = eq.replace(" ", "").split("->")
    sa, sb = lhs.split(",")
    ok = len(sa) == len(sb) == len(out) >= 2 and sa[:-2] == sb[:-2] == out[:-2] and "." not in eq
    if ok and sa[-2:] == out[-2] + sb[-1] and sb[-2] == out[-1] and sa[-1] == sb[-1]:
        rhs = L.b.transpose(L._name(c, "einsum.transpose"), L.T(ops[1]), -2, -1)  # a @ b^T
    elif ok and sa[-2] == out[-2] and sb[-1] == out[-1] and sa[-1] == sb[-2]:
        rhs = L.T(ops[1])  # a @ b
    else:
        raise Error(f"capture: einsum '{eq}'{_where(c)} is not mapped (batched a @ b and a @ b^T are)")
    L._set(c, L.b.matmul(L._name(c, "einsum"), L.T(ops[0]), rhs))


def _swapaxes(L, c):
    a = _Args(c, ["input", "axis0", "axis1"])
    d0 = a("axis0", a("dim0"))
    d1 = a("axis1", a("dim1"))
    L._set(c, L.b.transpose(L._name(c, "transpose"), L.T(a("input")), d0, d1))


_RULES.update({
    "expand": _expand,
    "__getitem__": _getitem,
    "multi_head_attention_forward": _multi_head_attention,
    "pad": _pad,
    "roll": _roll,
    "clone": _clone,
    "new_zeros": _factory, "new_ones": _factory, "new_empty": _factory, "new_full": _factory,
    "ne": _compare, "eq": _compare, "__ne__": _compare, "__eq__": _compare,
    "gt": _compare, "lt": _compare, "ge": _compare, "le": _compare,
    "__gt__": _compare, "__lt__": _compare, "__ge__": _compare, "__le__": _compare,
    "masked_fill": _masked_fill,
    "zero_": _zero_,
    "normalize": _normalize,
    "clamp": _clamp,
    "exp": _exp,
    "einsum": _einsum,
    "swapaxes": _swapaxes, "swapdims": _swapaxes,
})
