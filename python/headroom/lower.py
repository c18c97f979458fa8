"""Lowering of a captured Trace (recorder.py) onto headroom's graph, one GraphBuilder call per
recorded PyTorch call, then the Python references as holds.

Invariants: a call with no rule here is a headroom.Error naming the call and its module path
(never guessed); leaves are declared on first use, a module's parameters and buffers together in
registration order (the order the built-in models use); floating-point leaves take the run's dtype.
"""
from ._native import Error, GraphBuilder

_FLOATS = {"float32", "float16", "bfloat16", "float64"}


def _pair(v, what):
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(i, int) for i in v):
        return list(v)
    if isinstance(v, (list, tuple)) and len(v) == 1 and isinstance(v[0], int):
        return [v[0], v[0]]
    raise Error(f"capture: {what} must be an int or a pair of ints, got {v!r}")


class _Args:
    """A call's arguments by position or keyword, as the PyTorch signature names them."""

    def __init__(self, call, names):
        self.call = call
        self.values = dict(zip(names, call.args))
        for k, v in call.kwargs.items():
            self.values[k] = v
        extra = len(call.args) - len(names)
        self.rest = list(call.args[len(names):]) if extra > 0 else []

    def __call__(self, name, default=None):
        return self.values.get(name, default)


class Lowering:
    def __init__(self, trace, model_name, dtype="float32", dropout=True):
        self.t = trace
        self.dtype = dtype
        self.dropout = dropout
        self.b = GraphBuilder(model_name, dtype)
        self.ids = {}          # trace tid -> builder tensor id (the latest version after in-place calls)
        self.untracked = set()  # trace tids made by factories (no autograd, no parameters)
        self.last_op = []      # per call: the builder's last op id after lowering it

    # --- leaves ---------------------------------------------------------------------------------
    def _dt(self, dtype):
        return self.dtype if dtype in _FLOATS else dtype

    def _declare(self, info):
        b = self.b
        if info.role == "parameter":
            bid = b.parameter(info.name, info.shape, self._dt(info.dtype))
        elif info.role in ("buffer", "frozen"):
            # A frozen parameter is memory without a gradient or optimizer state: a buffer to the
            # interpreter.
            bid = b.buffer(info.name, info.shape, self._dt(info.dtype))
        elif info.role == "input":
            bid = b.input(info.name, info.shape, self._dt(info.dtype), 0 if info.shape else -1)
        elif info.role == "target":
            bid = b.target(info.name, info.shape, info.dtype, 0 if info.shape else -1)
        else:
            raise Error(f"capture: tensor '{info.name}' is used before it is made")
        self.ids[info.tid] = bid

    def _declare_module_of(self, info):
        prefix = info.name.rsplit(".", 1)[0] if "." in info.name else ""
        for other in self.t.tensors:
            if other.role in ("parameter", "buffer", "frozen") and other.tid not in self.ids:
                p = other.name.rsplit(".", 1)[0] if "." in other.name else ""
                if p == prefix:
                    self._declare(other)

    def T(self, ref):
        from .recorder import Ref
        if not isinstance(ref, Ref):
            raise Error(f"capture: expected a tensor, got {ref!r}")
        if ref.tid not in self.ids:
            info = self.t.tensors[ref.tid]
            if info.role in ("parameter", "buffer", "frozen"):
                self._declare_module_of(info)
            else:
                self._declare(info)
        return self.ids[ref.tid]

    def opt(self, ref):
        return -1 if ref is None else self.T(ref)

    # --- the run --------------------------------------------------------------------------------
    def run(self, loss_wanted):
        t, b = self.t, self.b
        for tid in t.inputs:
            self._declare(t.tensors[tid])
        began_loss = False
        for call in t.calls:
            if call.stage == "loss" and not began_loss:
                if not loss_wanted:
                    break
                for o in t.outputs:
                    b.mark_output(self.ids[o])
                b.begin_loss()
                began_loss = True
            self._lower(call)
            self.last_op.append(b.op_count() - 1)
        if not began_loss:
            for o in t.outputs:
                b.mark_output(self.ids[o])
        if loss_wanted:
            b.set_loss(self.ids[t.loss])
        # Parameters and buffers the step never read are still memory.
        for info in t.tensors:
            if info.role in ("parameter", "buffer", "frozen") and info.tid not in self.ids:
                self._declare(info)
        self._holds(loss_wanted)
        g = b.finish()
        self.graph_op_names = g.op_names()
        return g

    def _holds(self, loss_wanted):
        t = self.t
        returned = set(t.outputs) | ({t.loss} if loss_wanted else set())
        n = len(self.last_op)
        if n == 0:
            return
        for info in t.tensors:
            if info.role != "activation" or info.tid in returned or info.tid not in self.ids:
                continue
            if info.producer is None or info.producer >= n:
                continue
            d = info.dropped_at
            # Dropped when d calls had been recorded: Python held it through call d - 1. Alive at
            # the end (stored on a module, a global): held through the last op.
            last_call = n - 1 if d is None or d > n else d - 1
            until = self.last_op[last_call]
            if until >= 0:
                self.b.hold_until(self.ids[info.tid], until)

    def _name(self, call, short):
        m = call.module
        if not m:
            return short
        return m if m in self.t.leaf_modules else f"{m}.{short}"

    def _set(self, call, bid, index=0):
        self.ids[call.outputs[index]] = bid

    def _alias(self, call, ref):
        """The call returns its input unchanged (eval dropout, an in-place call on state)."""
        self.ids[call.outputs[0]] = self.T(ref)

    def _lower(self, call):
        rule = _RULES.get(call.name)
        if rule is None:
            where = f" in module '{call.module}'" if call.module else ""
            raise Error(f"capture: no headroom rule for the PyTorch call '{call.name}'{where} "
                        "(docs/python.md lists the calls capture maps)")
        rule(self, call)


# --- rules: one per PyTorch call (aliases share one) --------------------------------------------
def _is_scalar(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _conv2d(L, c):
    a = _Args(c, ["input", "weight", "bias", "stride", "padding", "dilation", "groups"])
    padding = a("padding", 0)
    if isinstance(padding, str):
        if padding != "valid":
            raise Error(f"capture: conv2d padding '{padding}' in module '{c.module}' is not mapped")
        padding = 0
    L._set(c, L.b.conv2d(L._name(c, "conv2d"), L.T(a("input")), L.T(a("weight")), L.opt(a("bias")),
                         _pair(a("stride", 1), "stride"), _pair(padding, "padding"),
                         _pair(a("dilation", 1), "dilation"), a("groups", 1)))


def _batch_norm(L, c):
    a = _Args(c, ["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"])
    L._set(c, L.b.batch_norm(L._name(c, "batch_norm"), L.T(a("input")), L.opt(a("weight")), L.opt(a("bias")),
                             L.opt(a("running_mean")), L.opt(a("running_var")), bool(a("training", False))))


def _linear(L, c):
    a = _Args(c, ["input", "weight", "bias"])
    L._set(c, L.b.linear(L._name(c, "linear"), L.T(a("input")), L.T(a("weight")), L.opt(a("bias"))))


def _layer_norm(L, c):
    a = _Args(c, ["input", "normalized_shape", "weight", "bias", "eps"])
    if len(a("normalized_shape")) != 1:
        raise Error(f"capture: layer_norm over several dimensions in module '{c.module}' is not mapped")
    L._set(c, L.b.layer_norm(L._name(c, "layer_norm"), L.T(a("input")), L.opt(a("weight")), L.opt(a("bias"))))


def _relu(L, c):
    a = _Args(c, ["input", "inplace"])
    inplace = c.name == "relu_" or bool(a("inplace", False))
    L._set(c, L.b.relu(L._name(c, "relu"), L.T(a("input")), inplace))


def _hardtanh(L, c):
    if c.name in ("relu6",):
        a = _Args(c, ["input", "inplace"])
        lo, hi = 0.0, 6.0
    else:
        a = _Args(c, ["input", "min_val", "max_val", "inplace"])
        lo, hi = float(a("min_val", -1.0)), float(a("max_val", 1.0))
    inplace = c.name == "hardtanh_" or bool(a("inplace", False))
    L._set(c, L.b.hardtanh(L._name(c, "hardtanh"), L.T(a("input")), lo, hi, inplace))


def _unary(method):
    def rule(L, c):
        a = _Args(c, ["input", "inplace"])
        if a("inplace", False) or c.name.endswith("_"):
            raise Error(f"capture: in-place {c.name} in module '{c.module}' is not mapped")
        L._set(c, getattr(L.b, method)(L._name(c, method), L.T(a("input"))))
    return rule


def _gelu(L, c):
    a = _Args(c, ["input", "approximate"])
    L._set(c, L.b.gelu(L._name(c, "gelu"), L.T(a("input")), a("approximate", "none") == "tanh"))


def _binary(tensor_op, inplace_op, scalar_op, reverse=False):
    def rule(L, c):
        a = _Args(c, ["input", "other", "alpha"])
        x, y = a("input"), a("other")
        if a("alpha", 1) != 1:
            raise Error(f"capture: {c.name} with alpha in module '{c.module}' is not mapped")
        inplace = c.inplace_of is not None
        if inplace:
            info = L.t.tensors[c.inplace_of]
            if info.role == "buffer" or c.inplace_of in L.untracked:
                # State updates (BatchNorm's num_batches_tracked += 1) and writes into a factory's
                # tensor (stochastic depth's noise) allocate nothing and track no gradient.
                L._alias(c, x)
                return
        if reverse:
            x, y = y, x
        name = L._name(c, tensor_op)
        if _is_scalar(y) or _is_scalar(x):
            if inplace or scalar_op is None or _is_scalar(x):
                raise Error(f"capture: {c.name} with a number in module '{c.module}' is not mapped")
            s = float(y)
            if tensor_op == "sub":
                L._set(c, L.b.add_scalar(name, L.T(x), -s))
            else:
                L._set(c, getattr(L.b, scalar_op)(name, L.T(x), s))
            return
        if inplace:
            if inplace_op is None:
                raise Error(f"capture: in-place {c.name} in module '{c.module}' is not mapped")
            L._set(c, getattr(L.b, inplace_op)(name, L.T(x), L.T(y)))
        else:
            L._set(c, getattr(L.b, tensor_op)(name, L.T(x), L.T(y)))
    return rule


def _max_pool2d(L, c):
    a = _Args(c, ["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"])
    if a("return_indices", False):
        raise Error(f"capture: max_pool2d with return_indices in module '{c.module}' is not mapped")
    k = _pair(a("kernel_size"), "kernel_size")
    s = a("stride")
    s = k if s is None or s == [] or s == () else _pair(s, "stride")
    L._set(c, L.b.max_pool2d(L._name(c, "max_pool2d"), L.T(a("input")), k, s, _pair(a("padding", 0), "padding"),
                             _pair(a("dilation", 1), "dilation"), bool(a("ceil_mode", False))))


def _avg_pool2d(L, c):
    a = _Args(c, ["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"])
    k = _pair(a("kernel_size"), "kernel_size")
    s = a("stride")
    s = k if s is None or s == [] or s == () else _pair(s, "stride")
    L._set(c, L.b.avg_pool2d(L._name(c, "avg_pool2d"), L.T(a("input")), k, s, _pair(a("padding", 0), "padding"),
                             bool(a("ceil_mode", False))))


def _adaptive_avg_pool2d(L, c):
    a = _Args(c, ["input", "output_size"])
    h, w = _pair(a("output_size"), "output_size")
    L._set(c, L.b.adaptive_avg_pool2d(L._name(c, "adaptive_avg_pool2d"), L.T(a("input")), h, w))


def _interpolate(L, c):
    a = _Args(c, ["input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"])
    mode = a("mode", "nearest")
    x = a("input")
    if mode not in ("nearest", "bilinear") or a("antialias", False) or len(L.t.tensors[x.tid].shape) != 4:
        raise Error(f"capture: interpolate mode '{mode}' in module '{c.module}' is not mapped "
                    "(nearest and bilinear of [N,C,H,W] are)")
    out = L.t.tensors[c.outputs[0]].shape
    L._set(c, L.b.upsample2d(L._name(c, "interpolate"), L.T(x), out[2], out[3], mode == "bilinear"))


def _shape_args(c):
    rest = list(c.args[1:])
    if "shape" in c.kwargs:
        rest = [c.kwargs["shape"]]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = list(rest[0])
    return [int(v) for v in rest]


def _view(L, c):
    L._set(c, L.b.view(L._name(c, "view"), L.T(c.args[0]), _shape_args(c)))


def _reshape(L, c):
    L._set(c, L.b.reshape(L._name(c, "reshape"), L.T(c.args[0]), _shape_args(c)))


def _cat(L, c):
    a = _Args(c, ["tensors", "dim"])
    L._set(c, L.b.cat(L._name(c, "cat"), [L.T(r) for r in a("tensors")], a("dim", 0)))


def _transpose(L, c):
    a = _Args(c, ["input", "dim0", "dim1"])
    L._set(c, L.b.transpose(L._name(c, "transpose"), L.T(a("input")), a("dim0"), a("dim1")))


def _permute(L, c):
    L._set(c, L.b.permute(L._name(c, "permute"), L.T(c.args[0]), _shape_args(c)))


def _contiguous(L, c):
    x = c.args[0]
    if L.b.is_contiguous(L.T(x)):
        L._alias(c, x)
    else:
        L._set(c, L.b.contiguous(L._name(c, "contiguous"), L.T(x)))


def _chunk(L, c):
    a = _Args(c, ["input", "chunks", "dim"])
    pieces = L.b.chunk(L._name(c, "chunk"), L.T(a("input")), a("chunks"), a("dim", 0))
    if len(pieces) != len(c.outputs):
        raise Error(f"capture: chunk in module '{c.module}' made {len(c.outputs)} pieces, headroom {len(pieces)}")
    for i, p in enumerate(pieces):
        L._set(c, p, i)


def _split(L, c):
    a = _Args(c, ["input", "split_size_or_sections", "dim"])
    size = a("split_size_or_sections", a("split_size"))
    if not isinstance(size, int):
        raise Error(f"capture: split into uneven sections in module '{c.module}' is not mapped")
    pieces = L.b.split(L._name(c, "split"), L.T(a("input")), size, a("dim", 0))
    for i, p in enumerate(pieces):
        L._set(c, p, i)


def _unsqueeze(L, c):
    a = _Args(c, ["input", "dim"])
    L._set(c, L.b.unsqueeze(L._name(c, "unsqueeze"), L.T(a("input")), a("dim")))


def _squeeze(L, c):
    a = _Args(c, ["input", "dim"])
    if a("dim") is None:
        raise Error(f"capture: squeeze without a dim in module '{c.module}' is not mapped")
    L._set(c, L.b.squeeze(L._name(c, "squeeze"), L.T(a("input")), a("dim")))


def _reduce(method):
    def rule(L, c):
        a = _Args(c, ["input", "dim", "keepdim"])
        x = a("input")
        if a("dtype") is not None:
            raise Error(f"capture: {c.name} with a dtype in module '{c.module}' is not mapped")
        dim = a("dim")
        if dim is None:
            dim = list(range(len(L.t.tensors[x.tid].shape)))
        elif isinstance(dim, int):
            dim = [dim]
        L._set(c, getattr(L.b, method)(L._name(c, c.name), L.T(x), list(dim), bool(a("keepdim", False))))
    return rule


def _softmax(method):
    def rule(L, c):
        a = _Args(c, ["input", "dim"])
        if a("dtype") is not None:
            raise Error(f"capture: {c.name} with a dtype in module '{c.module}' is not mapped")
        L._set(c, getattr(L.b, method)(L._name(c, method), L.T(a("input")), a("dim")))
    return rule


def _matmul(L, c):
    a = _Args(c, ["input", "other"])
    L._set(c, L.b.matmul(L._name(c, "matmul"), L.T(a("input")), L.T(a("other"))))


def _cross_entropy(L, c):
    a = _Args(c, ["input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                  "label_smoothing"])
    if a("weight") is not None or a("reduction", "mean") != "mean" or a("label_smoothing", 0.0) != 0.0:
        raise Error("capture: cross_entropy with weight, label smoothing or reduction other than mean is not mapped")
    L._set(c, L.b.cross_entropy(L._name(c, "cross_entropy"), L.T(a("input")), L.T(a("target"))))


def _mse_loss(L, c):
    a = _Args(c, ["input", "target", "size_average", "reduce", "reduction"])
    if a("reduction", "mean") != "mean":
        raise Error("capture: mse_loss with a reduction other than mean is not mapped")
    L._set(c, L.b.mse_loss(L._name(c, "mse_loss"), L.T(a("input")), L.T(a("target"))))


def _factory(L, c):
    info = L.t.tensors[c.outputs[0]]
    L._set(c, L.b.factory(L._name(c, c.name), info.shape, L._dt(info.dtype)))
    L.untracked.add(c.outputs[0])


def _inplace_on_factory(L, c):
    if c.inplace_of is None or c.inplace_of not in L.untracked:
        where = f" in module '{c.module}'" if c.module else ""
        raise Error(f"capture: no headroom rule for the PyTorch call '{c.name}'{where} on a tracked tensor")
    L._alias(c, c.args[0])


_RULES = {
    "conv2d": _conv2d,
    "batch_norm": _batch_norm,
    "linear": _linear,
    "layer_norm": _layer_norm,
    "relu": _relu, "relu_": _relu,
    "hardtanh": _hardtanh, "hardtanh_": _hardtanh, "relu6": _hardtanh,
    "sigmoid": _unary("sigmoid"), "tanh": _unary("tanh"),
    "gelu": _gelu,
    "add": _binary("add", "add_", "add_scalar"), "__add__": _binary("add", "add_", "add_scalar"),
    "__radd__": _binary("add", "add_", "add_scalar"), "add_": _binary("add", "add_", "add_scalar"),
    "__iadd__": _binary("add", "add_", "add_scalar"),
    "mul": _binary("mul", None, "mul_scalar"), "__mul__": _binary("mul", None, "mul_scalar"),
    "__rmul__": _binary("mul", None, "mul_scalar"), "mul_": _binary("mul", None, "mul_scalar"),
    "sub": _binary("sub", None, "add_scalar"), "__sub__": _binary("sub", None, "add_scalar"),
    "div": _binary("div", None, "div_scalar"), "__truediv__": _binary("div", None, "div_scalar"),
    "div_": _binary("div", None, "div_scalar"),
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "interpolate": _interpolate,
    "view": _view, "reshape": _reshape,
    "cat": _cat, "concat": _cat,
    "transpose": _transpose, "permute": _permute, "contiguous": _contiguous,
    "chunk": _chunk, "split": _split, "unsqueeze": _unsqueeze, "squeeze": _squeeze,
    "mean": _reduce("mean_dims"), "sum": _reduce("sum_dims"),
    "softmax": _softmax("softmax"), "log_softmax": _softmax("log_softmax"),
    "matmul": _matmul, "__matmul__": _matmul,
    "cross_entropy": _cross_entropy, "mse_loss": _mse_loss,
    "zeros": _factory, "ones": _factory, "empty": _factory, "full": _factory, "rand": _factory,
    "randn": _factory, "zeros_like": _factory, "ones_like": _factory, "empty_like": _factory,
    "bernoulli_": _inplace_on_factory, "fill_": _inplace_on_factory, "zero_": _inplace_on_factory,
    "uniform_": _inplace_on_factory, "normal_": _inplace_on_factory,
}

# The other rule modules register into _RULES: lower_vision.py owns silu, dropout and flatten
# (with their in-place forms and flatten's copy of a tensor it cannot view).
from . import lower_vision  # noqa: E402,F401
from . import lower_attention  # noqa: E402,F401  registers the transformer classifiers' rules
from . import lower_unet  # noqa: E402,F401  (registers conv_transpose2d)
