"""The capture rules of python/headroom/lower_attention.py: nn.MultiheadAttention on the path a real
run takes, indexing, F.pad, torch.roll, swin's shift mask, cosine attention and einsum, each pinned
by its bytes or by an equal built-in or hand-written twin."""
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402

F32 = 4


def _estimate(model, x, mode, **kw):
    return headroom.estimate(model, x, mode=mode, device="cpu", **kw)


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_vit_b_16_equals_its_builtin_twin(mode):
    # The built-in vit_b_16 (src/frontends/zoo/vit.cc) writes both attention paths by hand and is
    # validated against measurements (docs/accuracy.md): the capture lowers to the same program.
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16()
    y = torch.zeros(1, dtype=torch.long)
    loss = (lambda out: F.cross_entropy(out, y)) if mode == "train" else None
    options = dict(mode=mode, device="cpu", optimizer="sgd", foreach=False)
    builtin = headroom.estimate("vit_b_16", batch=1, **options)
    captured = headroom.estimate(model, torch.randn(1, 3, 224, 224), loss_fn=loss, **options)
    assert captured["parameter_count"] == builtin["parameter_count"]
    assert captured["peak_bytes"] == builtin["peak_bytes"]
    assert captured["breakdown_at_peak"] == builtin["breakdown_at_peak"]
    assert captured.get("steps") == builtin.get("steps")


class SelfAttention(nn.Module):
    def __init__(self, heads, batch_first=True):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, heads, batch_first=batch_first)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class SequenceFirst(nn.Module):
    """A caller's own transpose into a sequence-first module: PyTorch takes the Python path."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)

    def forward(self, x):
        s = x.transpose(0, 1)
        return self.attn(s, s, s, need_weights=False)[0]


def _op_names(model, x, mode):
    return headroom.capture(model, x, mode=mode).graph().op_names()


def test_multi_head_attention_takes_the_fused_path_only_where_pytorch_does():
    x = torch.randn(2, 5, 8)
    # Eval without grad, batch_first, an even head count: torch._native_multi_head_attention.
    assert any("transform_bias_rescale_qkv" in n for n in _op_names(SelfAttention(2), x, "infer"))
    # Training, an odd head count, or sequence-first inputs: F.multi_head_attention_forward.
    for model, mode, inp in ((SelfAttention(2), "train", x), (SelfAttention(1), "infer", x),
                             (SelfAttention(2, batch_first=False), "infer", x.transpose(0, 1).contiguous()),
                             (SequenceFirst(), "infer", x)):
        names = _op_names(model, inp, mode)
        assert not any("transform_bias_rescale_qkv" in n for n in names)
        assert any("q_scaled" in n for n in names)


def test_the_fused_path_is_what_pytorch_runs(monkeypatch):
    # The premise of the rule, on the installed PyTorch: a real eval run under no_grad calls
    # torch._native_multi_head_attention; with grad, in train mode, and under capture it does not.
    calls = []
    original = torch._native_multi_head_attention
    monkeypatch.setattr(torch, "_native_multi_head_attention", lambda *a, **k: calls.append(1) or original(*a, **k))
    model, x = SelfAttention(2).eval(), torch.randn(2, 5, 8)
    with torch.no_grad():
        model(x)
    assert len(calls) == 1
    model(x)
    with torch.no_grad():
        model.train()(x)
    headroom.capture(model.eval(), x, mode="infer")
    assert len(calls) == 1
    with torch.no_grad():
        SequenceFirst().eval()(x)
    assert len(calls) == 1


def test_fused_attention_bytes():
    # B=2, S=5, D=8, 2 heads, fp32. Weights: in_proj 24*8 + 24, out_proj 8*8 + 8 = 288 floats =
    # 1152 bytes; input 2*5*8*4 = 320. Over those:
    #   mm -> qkv [10, 24] 960; _transform_bias_rescale_qkv -> packed [3, 2, 2, 5, 4] 960 while
    #   qkv is alive: 1920 (peak), then qkv freed -> 960;
    #   bmm -> scores [4, 5, 5] 400 -> 1360; softmax 400 -> 1760; scores freed -> 1360;
    #   bmm -> [4, 5, 4] 320 -> 1680; ... the out-projection stays below.
    r = _estimate(SelfAttention(2), torch.randn(2, 5, 8), "infer")
    assert r["weights_bytes"] == 1152
    assert r["input_bytes"] == 320
    assert r["peak_bytes"] == 1152 + 320 + 960 + 960
    assert r["peak_op"].endswith("transform_bias_rescale_qkv")


class PadRoll(nn.Module):
    def forward(self, x):
        return torch.roll(F.pad(x, (0, 0, 0, 1, 0, 1)), shifts=(1, 1), dims=(1, 2))


def test_pad_and_roll_allocate_new_tensors():
    # x [1, 4, 4, 2] = 128 bytes; pad -> [1, 5, 5, 2] = 200 (new); a roll over two dims rolls one
    # dim at a time (roll_common): 200 for dim 1, then 200 for dim 2 while the first and the pad
    # (still an argument) are alive: 128 + 200 + 200 + 200.
    r = _estimate(PadRoll(), torch.randn(1, 4, 4, 2), "infer")
    assert r["peak_bytes"] == 128 + 200 + 200 + 200
    # One dim: one roll.
    one = type("PadRoll1", (nn.Module,), {"forward": lambda s, x: torch.roll(F.pad(x, (0, 0, 0, 1, 0, 1)), 1, 1)})()
    assert _estimate(one, torch.randn(1, 4, 4, 2), "infer")["peak_bytes"] == 128 + 200 + 200


class Indexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(9, 3))
        self.register_buffer("index", torch.arange(16) % 9)

    def forward(self, x):
        bias = self.table[self.index]          # a gather: [16, 3]
        return x[0] + x[:, 1:3].sum() + bias   # a lone int and a slice, both views


def test_lone_indices_and_tensor_indices_are_traced():
    # PyTorch 1.13 sends x[0] and table[index] past a TorchFunctionMode; the recorder routes them
    # through it, so nothing of the forward enters the trace as an extra input.
    x = torch.randn(4, 16, 3)
    r = _estimate(Indexing(), x, "infer")
    assert r["input_bytes"] == 4 * 16 * 3 * F32
    names = _op_names(Indexing(), x, "train")
    assert any(n.endswith("getitem") for n in names)
    t = _estimate(Indexing(), x, "train")
    assert t["parameter_count"] == 27


class Einsum(nn.Module):
    def __init__(self, equation):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 2, 3, 6, 4))
        self.equation = equation

    def forward(self, x):
        q = x.permute(0, 1, 3, 2, 4)  # [B, G, H, P, D] from [B, G, P, H, D]: not contiguous
        if self.equation == "matmul":
            return (q @ self.w.transpose(-2, -1)).sum(-1)
        return torch.einsum(self.equation, q, self.w).sum(-1)


def test_einsum_is_the_batched_matmul_it_runs():
    # maxvit's einsum("B G H I D, B G H J D -> B G H I J", q, k) on a permuted q: the same copies,
    # product and saved operands as q @ k.transpose(-2, -1) (both fold to bmm in PyTorch 1.13).
    x = torch.randn(1, 2, 6, 3, 4)
    for mode in ("infer", "train"):
        ours = _estimate(Einsum("B G H I D, B G H J D -> B G H I J"), x, mode)
        twin = _estimate(Einsum("matmul"), x, mode)
        assert ours["peak_bytes"] == twin["peak_bytes"]
        assert ours.get("steps") == twin.get("steps")


class FillTracked(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return (x * self.w).masked_fill(x > 0, 0.0)


class MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x):
        x = x[None]
        return self.attn(x, x, x, attn_mask=torch.zeros(4, 4), need_weights=False)[0]


@pytest.mark.parametrize("module, message", [
    (lambda: type("Reflect", (nn.Module,), {"forward": lambda s, x: F.pad(x, (1, 1), mode="reflect")})(),
     "constant padding"),
    (lambda: type("Trace", (nn.Module,), {"forward": lambda s, x: torch.einsum("ii->i", x)})(), "einsum"),
    (FillTracked, "masked_fill of a tensor autograd tracks"),
    (MaskedAttention, "no masks"),
])
def test_unmapped_forms_are_named(module, message):
    with pytest.raises(headroom.Error, match=message):
        headroom.capture(module(), torch.randn(4, 4), mode="infer").graph()


class CosineScores(nn.Module):
    def forward(self, x):
        q = x.permute(0, 2, 1, 3)  # [1, 3, 4, 2] over [1, 4, 3, 2] memory: not contiguous
        return F.normalize(q, dim=-1) @ F.normalize(q, dim=-1).transpose(-2, -1)


def test_normalize_keeps_its_inputs_layout_and_matmul_copies_it():
    # swin_v2's cosine attention (measured on swin_v2_t: two copies inside the matmul). x 96 bytes;
    # each normalize: norm [1, 3, 4, 1] 48, clamp_min 48, the quotient 96 laid out like q (not
    # contiguous); matmul copies both operands (96 + 96) and writes [1, 3, 4, 4] 192:
    # 96 + 96 + 96 + 96 + 96 + 192 at the bmm.
    r = _estimate(CosineScores(), torch.randn(1, 4, 3, 2), "infer")
    assert r["peak_bytes"] == 96 + 2 * 96 + 2 * 96 + 192
