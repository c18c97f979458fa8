"""Capture of an nn.Module: one forward (and loss) run on meta tensors, recorded at the level of
PyTorch calls (F.conv2d, F.batch_norm, Tensor.add_, ...), with module scopes and the moment Python
drops each tensor. lower.py turns the record into headroom's graph; headroom's own rules then give
autograd's saved tensors, the backward and the optimizer step, as for the built-in models.

Why calls and not aten ops (docs/python.md): headroom's IR is one op per PyTorch call, because what
autograd saves is defined per call; the calls are what the built-in models are written in, so a
captured torchvision model lowers to the same graph as its built-in twin. Recording runs under
torch.no_grad() on meta tensors: nothing is allocated and no autograd reference keeps a tensor
alive, so a tensor's drop time is Python's alone. PyTorch 1.13 has no meta kernel for convolution's
backward, which this design never needs.

Invariants: the user's module is left as it was (its parameters and buffers are swapped for meta
tensors only during the run, and its training flags are restored); every call that returns a
tensor is either recorded or refused with a headroom.Error naming the call and the module path.
"""
import weakref

import torch
from torch.overrides import TorchFunctionMode

from ._native import Error



class TensorInfo:
    """A tensor seen by the capture: a leaf (parameter, buffer, input, target, constant) or the
    output of a recorded call."""

    def __init__(self, tid, shape, dtype, role, name):
        self.tid = tid
        self.shape = list(shape)
        self.dtype = str(dtype).replace("torch.", "")
        self.role = role  # parameter, frozen, buffer, input, target, activation
        self.name = name
        self.dropped_at = None  # number of calls recorded when Python dropped it
        self.producer = None


class Call:
    """One recorded PyTorch call: its name, arguments with tensors replaced by Ref, outputs."""

    def __init__(self, index, func, name, args, kwargs, outputs, module, stage, inplace_of):
        self.index = index
        self.func = func
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.outputs = outputs
        self.module = module
        self.stage = stage
        self.inplace_of = inplace_of  # tid when the call returned one of its inputs (in place)


class Ref:
    __slots__ = ("tid",)

    def __init__(self, tid):
        self.tid = tid

    def __repr__(self):
        return f"%{self.tid}"


def _func_name(func):
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property (x.T, x.data): name it by the property
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


# Calls whose kernels PyTorch 1.13 lacks on meta tensors (F.cross_entropy of [N,C,H,W] logits runs
# nll_loss2d, which has none): name -> a function of the call's arguments returning its result on
# meta tensors. Rule modules register theirs (lower_unet.py).
META_FALLBACKS = {}


class _Recorder(TorchFunctionMode):
    def __init__(self, cap):
        super().__init__()
        self.cap = cap

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cap = self.cap
        name = _func_name(func)
        args = cap._leaves(args)
        kwargs = cap._leaves(kwargs)
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:
            if name not in META_FALLBACKS:
                raise
            out = META_FALLBACKS[name](*args, **kwargs)
        # Calls that return no tensor (x.dim(), x.size(), x.shape) are metadata: not recorded. Every
        # call that returns a tensor is recorded, and lowered or refused by name.
        if not _has_tensor(out):
            return out
        return cap._record(func, name, args, kwargs, out)


class _IndexingThroughMode:
    """PyTorch 1.13's Tensor.__getitem__ does not reach a TorchFunctionMode for a lone index or an
    index holding a tensor (x[0], x[1:3], table[index]): the result would enter the trace as an
    unknown input. During the recording, __getitem__ hands every call to the mode, which records it
    once and runs the original."""

    def __enter__(self):
        self.own = torch.Tensor.__dict__.get("__getitem__")
        original = torch.Tensor.__getitem__

        def getitem(tensor, index):
            if torch._C._is_torch_function_mode_enabled():
                return torch.overrides.handle_torch_function(original, (tensor,), tensor, index)
            return original(tensor, index)

        getitem.__name__ = "__getitem__"
        torch.Tensor.__getitem__ = getitem
        return self

    def __exit__(self, *exc):
        if self.own is None:
            del torch.Tensor.__getitem__
        else:
            torch.Tensor.__getitem__ = self.own
        return False


def _has_tensor(x):
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_tensor(v) for v in x)
    return False


class Trace:
    """The record of one captured step (see module doc)."""

    def __init__(self):
        self.tensors = []
        self.calls = []
        self.inputs = []   # tids of the example inputs
        self.outputs = []  # tids of the model's outputs
        self.loss = None
        self.stage = "model"
        self.scope = []
        self.leaf_modules = set()  # module paths without children (an nn.ReLU names its own call)
        self._consts = {}  # id(real tensor) -> (real tensor, meta tensor), kept for the run

    # --- tensors -------------------------------------------------------------------------------
    def _new(self, t, role, name):
        info = TensorInfo(len(self.tensors), t.shape, t.dtype, role, name)
        info.stride = list(t.stride())  # the meta kernel's layout (an elementwise op keeps its input's)
        self.tensors.append(info)
        t._headroom_tid = info.tid
        weakref.finalize(t, self._dropped, info.tid)
        return info

    def _dropped(self, tid):
        self.tensors[tid].dropped_at = len(self.calls)

    def tid(self, t):
        return getattr(t, "_headroom_tid", None)

    def _leaves(self, x):
        """Arguments with every tensor the capture has not seen replaced by a meta copy registered
        as a leaf: an input or constant in the model, a target in the loss."""
        if isinstance(x, torch.Tensor):
            if self.tid(x) is not None:
                return x
            key = id(x)
            if key not in self._consts:
                meta = torch.empty(x.shape, dtype=x.dtype, device="meta")
                role = "target" if self.stage == "loss" else "input"
                self._new(meta, role, f"{self.stage}.{role}{len(self._consts)}")
                self._consts[key] = (x, meta)
            return self._consts[key][1]
        if isinstance(x, (list, tuple)):
            return type(x)(self._leaves(v) for v in x)
        if isinstance(x, dict):
            return {k: self._leaves(v) for k, v in x.items()}
        return x

    def _ref(self, x):
        if isinstance(x, torch.Tensor):
            return Ref(self.tid(x))
        if isinstance(x, (list, tuple)):
            return type(x)(self._ref(v) for v in x)
        if isinstance(x, dict):
            return {k: self._ref(v) for k, v in x.items()}
        if isinstance(x, torch.dtype):
            return str(x).replace("torch.", "")
        return x

    def _record(self, func, name, args, kwargs, out):
        module = self.scope[-1] if self.scope else ""
        inputs = [t for t in _flat(args) + _flat(kwargs) if isinstance(t, torch.Tensor)]
        input_ids = {id(t) for t in inputs}
        outs = out if isinstance(out, (list, tuple)) else (out,)
        inplace_of = None
        result = []
        out_ids = []
        for o in outs:
            if not isinstance(o, torch.Tensor):
                result.append(o)
                continue
            if id(o) in input_ids:  # an in-place call returns its input
                inplace_of = self.tid(o)
                out_ids.append(self.tid(o))
                result.append(o)
                continue
            if o.device.type != "meta":  # a factory made a real tensor: continue on meta
                o = torch.empty(o.shape, dtype=o.dtype, device="meta")
            info = self._new(o, "activation", f"{module}.{name}" if module else name)
            info.producer = len(self.calls)
            out_ids.append(info.tid)
            result.append(o)
        call = Call(len(self.calls), func, name, self._ref(args), self._ref(kwargs), out_ids, module, self.stage,
                    inplace_of)
        self.calls.append(call)
        if isinstance(out, torch.Tensor):
            return result[0]
        return type(out)(result) if isinstance(out, tuple) else result


def _flat(x):
    if isinstance(x, (list, tuple)):
        r = []
        for v in x:
            r.extend(_flat(v))
        return r
    if isinstance(x, dict):
        return _flat(list(x.values()))
    return [x]


class _MetaState:
    """Swaps every parameter and buffer of a module for a meta tensor of the same shape, registered
    as a leaf of the trace; restores the originals on exit. Tied parameters (one object under two
    names) stay one tensor."""

    def __init__(self, model, trace, training):
        self.model = model
        self.trace = trace
        self.training = training
        self.saved = []
        self.flags = []
        self.names = {}

    def __enter__(self):
        by_object = {}
        for mod_name, mod in self.model.named_modules():
            self.names[mod] = mod_name
            if mod_name and next(iter(mod.children()), None) is None:
                self.trace.leaf_modules.add(mod_name)
            self.flags.append((mod, mod.training))
            for store, kind in ((mod._parameters, "param"), (mod._buffers, "buffer")):
                for key, t in list(store.items()):
                    if t is None:
                        continue
                    self.saved.append((store, key, t))
                    if id(t) not in by_object:
                        meta = torch.empty(t.shape, dtype=t.dtype, device="meta")
                        if kind == "param":
                            meta = torch.nn.Parameter(meta, requires_grad=t.requires_grad)
                            role = "parameter" if t.requires_grad else "frozen"
                        else:
                            role = "buffer"
                        full = f"{mod_name}.{key}" if mod_name else key
                        self.trace._new(meta, role, full)
                        by_object[id(t)] = meta
                    store[key] = by_object[id(t)]
        self.model.train(self.training)
        return self

    def __exit__(self, *exc):
        for store, key, t in self.saved:
            store[key] = t
        for mod, flag in self.flags:
            mod.training = flag
        return False


def default_loss(out):
    """The loss when loss_fn is None: the sum of every tensor in the output (a tensor, a tuple or
    namedtuple such as GoogLeNetOutputs, a list, a dict such as a segmentation model's
    {"out", "aux"}), in order: out[0].sum() + out[1].sum() + ..."""
    tensors = [t for t in _flat(out) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise Error("capture: the model returned no tensor for the default loss to sum; pass loss_fn")
    loss = tensors[0].sum()
    for t in tensors[1:]:
        loss = loss + t.sum()
    return loss


def _as_tuple(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in example_inputs):
        return tuple(example_inputs)
    raise Error("example_inputs must be a tensor or a tuple of tensors, got " + type(example_inputs).__name__)


def record(model, example_inputs, loss_fn=None, mode="train", batch=None):
    """Runs one step of `model` on meta tensors and returns its Trace. `batch` resizes the first
    dimension of every input (and of every tensor the loss function brings in with the inputs'
    batch size), for fit's other batch sizes."""
    if not isinstance(model, torch.nn.Module):
        raise Error("model must be an nn.Module, got " + type(model).__name__)
    if mode not in ("train", "infer"):
        raise Error(f"mode must be infer or train, got '{mode}'")
    if loss_fn is not None and mode == "infer":
        raise Error("loss_fn applies to mode='train'; inference runs no loss")
    if loss_fn is not None and not callable(loss_fn):
        raise Error("loss_fn must be a callable (output -> scalar tensor), got " + type(loss_fn).__name__)
    inputs = _as_tuple(example_inputs)
    trace = Trace()
    first = inputs[0].shape[0] if inputs and inputs[0].dim() > 0 else None

    def resized(t):
        shape = list(t.shape)
        if batch is not None and shape and shape[0] == first:
            shape[0] = batch
        return torch.empty(shape, dtype=t.dtype, device="meta")

    metas = []
    for i, x in enumerate(inputs):
        m = resized(x)
        trace._new(m, "input", f"input{i}" if len(inputs) > 1 else "input")
        trace.inputs.append(trace.tid(m))
        metas.append(m)
    if batch is not None:
        orig_leaves = trace._leaves

        def leaves(x):
            if isinstance(x, torch.Tensor) and trace.tid(x) is None and id(x) not in trace._consts:
                m = resized(x)
                role = "target" if trace.stage == "loss" else "input"
                trace._new(m, role, f"{trace.stage}.{role}{len(trace._consts)}")
                trace._consts[id(x)] = (x, m)
            return orig_leaves(x)

        trace._leaves = leaves
    state = _MetaState(model, trace, mode == "train")

    def pre_hook(mod, args):
        trace.scope.append(state.names.get(mod, type(mod).__name__))

    def post_hook(mod, args, out):
        trace.scope.pop()

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre_hook),
             torch.nn.modules.module.register_module_forward_hook(post_hook)]
    try:
        with state, torch.no_grad(), _IndexingThroughMode(), _Recorder(trace):
            try:
                out = model(*metas)
                if mode == "train":
                    trace.stage = "loss"
                    trace.scope = []
                    loss = loss_fn(out) if loss_fn is not None else default_loss(out)
            except Error:
                raise
            except Exception as e:  # the module failed on meta tensors
                where = f" in module '{trace.scope[-1]}'" if trace.scope and trace.scope[-1] else ""
                raise Error(f"capture: the model failed on meta tensors{where}: {type(e).__name__}: {e}") from e
        # A tensor, a tuple or list of tensors, or a dict of them (torchvision's segmentation
        # models return {"out": ..., "aux": ...}): every tensor is an output.
        outs = list(out.values()) if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else (out,)
        for o in outs:
            if not isinstance(o, torch.Tensor) or trace.tid(o) is None:
                raise Error("capture: the model must return a tensor, a tuple or a dict of tensors, got " +
                            type(o).__name__)
            trace.outputs.append(trace.tid(o))
        if mode == "train":
            if not isinstance(loss, torch.Tensor) or trace.tid(loss) is None or loss.dim() != 0:
                raise Error("capture: loss_fn must return a scalar tensor computed from the output")
            trace.loss = trace.tid(loss)
    finally:
        for h in hooks:
            h.remove()
    # Whatever the model or loss still references after the step (stored on a module, a global)
    # lives to the end: dropped_at stays None.
    del out, outs
    if mode == "train":
        del loss
    trace._consts.clear()
    return trace


from . import lower  # noqa: E402,F401  (imports the rule modules, which register META_FALLBACKS)
