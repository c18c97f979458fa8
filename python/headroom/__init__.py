"""headroom: how much GPU memory a PyTorch model needs, before you run it (docs/python.md).

    import headroom
    headroom.estimate("resnet50", batch=32)["peak_bytes"]
    headroom.estimate(net, (x,), loss_fn=lambda out: F.cross_entropy(out, y), optimizer="sgd", device="cpu")

estimate, fit, plan and report return what `headroom estimate|fit|plan --json` prints for the
same options (the CLI's JSON, parsed), and take the CLI's options as keyword arguments
(--micro-batch as micro_batch=...). A model is a built-in spec ("resnet50", "mlp:layers=4"), an
.onnx path, an nn.Module with example inputs, or a headroom.capture(...) result.

pack, merge and joint_train (gemel.py, docs/pack.md) run GEMEL's loop on several nn.Modules:
pack's merge plan, the rewrite that shares the planned layers, and joint retraining with back-off.
"""
import json

from ._native import Error, InputError
from . import _native

__all__ = ["Error", "InputError", "Capture", "Merge", "Plan", "capture", "estimate", "fit", "joint_train", "merge",
           "pack", "plan", "report", "trace", "unique_bytes"]


class Capture:
    """One captured step of an nn.Module (recorder.py) and what it needs to be captured again at
    another batch size (fit)."""

    def __init__(self, model, example_inputs, loss_fn, mode):
        from .recorder import record
        self.model = model
        self.example_inputs = example_inputs
        self.loss_fn = loss_fn
        self.mode = mode
        self.trace = record(model, example_inputs, loss_fn, mode)
        self.name = type(model).__name__
        first = self.trace.tensors[self.trace.inputs[0]].shape if self.trace.inputs else []
        self.batch = first[0] if first else 1

    def lowering(self, batch=None, dtype="float32", dropout=True):
        """The lowered step (lower.Lowering: the graph's op names, each call's ops)."""
        from .recorder import record
        from .lower import Lowering
        trace = self.trace
        if batch is not None and batch != self.batch:
            trace = record(self.model, self.example_inputs, self.loss_fn, self.mode, batch=batch)
        low = Lowering(trace, self.name, dtype, dropout)
        low.graph = low.run(self.mode == "train")
        return low

    def graph(self, batch=None, dtype="float32", dropout=True):
        """headroom's graph of the step (a _native.Graph) at `batch` (default: the inputs')."""
        return self.lowering(batch, dtype, dropout).graph

    @property
    def parameter_count(self):
        return self.graph().parameter_count

    def _loader(self, batch, seq, dtype, inference, dropout_scale, loss):
        if seq is not None:
            raise Error("seq does not apply to a captured module: its sizes come from example_inputs")
        if loss != 0:
            raise Error("loss does not apply to a captured module: pass loss_fn")
        if inference != (self.mode == "infer"):
            raise Error(f"the module was captured with mode='{self.mode}'; capture it again for this mode")
        return self.graph(batch, dtype, dropout_scale != 0)


def capture(model, example_inputs, loss_fn=None, mode="train"):
    """Captures one step of `model` on meta tensors at the shapes of `example_inputs` (a tensor or
    a tuple of positional tensors). loss_fn(output) -> scalar tensor (default: output.sum()) is
    recorded in training mode."""
    return Capture(model, example_inputs, loss_fn, mode)


def _optimizer_name(value, options):
    """A torch.optim optimizer (instance or class) as the CLI's name; an instance's foreach too."""
    import torch
    cls = value if isinstance(value, type) else type(value)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise Error(f"optimizer must be a name or a torch.optim optimizer, got {value!r}")
    group = value.defaults if not isinstance(value, type) else {}
    if group.get("amsgrad") or group.get("maximize") or group.get("nesterov"):
        raise Error(f"optimizer {cls.__name__} with amsgrad, maximize or nesterov is not modelled")
    names = {torch.optim.Adam: "adam", torch.optim.AdamW: "adamw", torch.optim.SGD: "sgd"}
    if cls not in names:
        raise Error(f"optimizer {cls.__name__} is not modelled (sgd, momentum, adam or adamw)")
    name = names[cls]
    if cls is torch.optim.SGD and group.get("momentum", 0):
        name = "momentum"
    if group.get("foreach") is not None and "foreach" not in options:
        options["foreach"] = bool(group["foreach"])
    return name


def _text(name, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise Error(f"option {name} must be a number, text or True/False, got {value!r}")


def _pairs(options):
    out = []
    for name, value in options.items():
        if value is None:
            continue
        if name == "dim":
            if not isinstance(value, dict):
                raise Error("dim must be a dict NAME -> VALUE")
            out += [("dim", f"{k}={_text('dim', v)}") for k, v in value.items()]
        elif name in ("checkpoint", "offload", "price"):
            values = [value] if isinstance(value, str) else list(value)
            out += [(name, _text(name, v)) for v in values]
        else:
            out.append((name, _text(name, value)))
    return out


def _resolve(model, example_inputs, options):
    """(display name, captured loader or None, option pairs) for the native functions."""
    options = dict(options)
    loss_fn = options.pop("loss_fn", None)
    if "optimizer" in options and not isinstance(options["optimizer"], str):
        options["optimizer"] = _optimizer_name(options["optimizer"], options)
    if isinstance(model, str):
        if example_inputs is not None or loss_fn is not None:
            raise Error("example_inputs and loss_fn apply to an nn.Module, not to '" + model + "'")
        return model, None, _pairs(options)
    mode = options.get("mode", "train")
    if not isinstance(mode, str):
        raise Error(f"mode must be infer or train, got {mode!r}")
    if "batch" in options:
        raise Error("batch is read from example_inputs for a module")
    if isinstance(model, Capture):
        if example_inputs is not None or loss_fn is not None:
            raise Error("example_inputs and loss_fn were given to capture(); pass the capture alone")
        cap = model
    else:
        cap = _capture_for(model, example_inputs, loss_fn, mode)
    options["batch"] = cap.batch
    return cap.name, cap._loader, _pairs(options)


def estimate(model, example_inputs=None, **options):
    """The estimate as `headroom estimate --json` prints it, parsed."""
    name, loader, pairs = _resolve(model, example_inputs, options)
    return json.loads(_native.estimate_json(name, pairs, loader))


def fit(model, example_inputs=None, vary="batch", **options):
    """The largest batch (vary="batch") or sequence that fits: `headroom fit --json`, parsed."""
    name, loader, pairs = _resolve(model, example_inputs, options)
    return json.loads(_native.fit_json(name, pairs, loader, vary))


class Plan(dict):
    """`headroom plan --json`, parsed, and for a module: apply(model) rewrites it to follow the
    plan's checkpointing and offloading (apply.py); `applied` then holds the checkpoint ranges and
    offloaded modules really applied and their re-simulated estimate."""

    def __init__(self, d, capture, options):
        super().__init__(d)
        self._capture = capture
        self._options = options
        self.applied = None

    @property
    def micro_batch(self):
        """The batch each forward/backward runs at."""
        return self["decisions"]["micro_batch"]

    @property
    def micro_batches(self):
        """Forward/backward passes per optimizer step (gradient accumulation when > 1)."""
        return self["decisions"]["micro_batches"]

    def step(self, model, batches, loss_fn, optimizer):
        """One optimizer step as the plan runs it: forward and backward of `micro_batches`
        (inputs, targets) pairs taken from the iterable `batches`, each at `micro_batch`, with
        loss_fn(output, targets) / micro_batches so that the gradients are the full batch's mean;
        then optimizer.step() and zero_grad(set_to_none=True). Returns the summed loss (a float).
        The plan's peak assumes the micro-batches arrive one at a time (a DataLoader at
        micro_batch): chunking a full batch you keep adds the rest of the batch's input bytes."""
        total = 0.0
        done = 0
        for _, (inputs, targets) in zip(range(self.micro_batches), batches):
            out = model(*inputs) if isinstance(inputs, tuple) else model(inputs)
            loss = loss_fn(out, targets) / self.micro_batches
            loss.backward()
            total += float(loss)
            del out, loss
            done += 1
        if done != self.micro_batches:
            raise Error(f"plan.step: batches gave {done} micro-batches, the plan runs {self.micro_batches}")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total

    def apply(self, model, checkpoint_impl=None):
        """checkpoint_impl: "reentrant" (torch.utils.checkpoint's default in 1.13) or
        "non-reentrant" (use_reentrant=False); by default the one the plan was made for
        (plan(..., checkpoint_impl=...)). The re-estimate models the one applied."""
        from . import apply as ap
        if checkpoint_impl is None:
            checkpoint_impl = self["decisions"].get("checkpoint_impl", "reentrant")
        if checkpoint_impl not in ("reentrant", "non-reentrant"):
            raise Error(f"plan.apply: checkpoint_impl must be reentrant or non-reentrant, got {checkpoint_impl!r}")
        if self._capture is None:
            raise Error("plan.apply needs a plan made for an nn.Module")
        if not self.get("feasible"):
            raise Error("plan.apply: the plan is not feasible")
        actions = ap.planned_actions(self)
        low = self._capture.lowering()
        mops = ap.ModuleOps(low)
        chosen = ap.choose_regions(model, mops, self["decisions"]["checkpoint_regions"])
        ranges = ap.ranges(mops, chosen, model)
        offload_modules, offload_ops = ap.choose_offload(model, mops, actions)
        options = dict(self._options)
        options["checkpoint"] = ranges
        options.pop("checkpoint_impl", None)
        if ranges and checkpoint_impl != "reentrant":
            options["checkpoint_impl"] = checkpoint_impl
        options["offload"] = offload_ops
        if self.micro_batches > 1:  # accumulate+checkpoint: the segments at the micro-batch
            options["micro_batch"] = self.micro_batch
        # Re-simulated before the model is touched: an error leaves it as it was.
        applied_estimate = estimate(self._capture, **options)
        ap.apply_segments(model, chosen, use_reentrant=checkpoint_impl == "reentrant")
        ap.apply_offload(model, offload_modules)
        not_applied = sorted(n for n, a in actions.items() if a == "offload" and n not in set(offload_ops))
        self.applied = dict(checkpoint=ranges, checkpoint_impl=checkpoint_impl, offload=offload_modules, offload_ops=offload_ops,
                            offload_not_applied=not_applied, estimate=applied_estimate)
        return model


def plan(model, example_inputs=None, budget=None, activation_budget=None, strategy="auto", cost_gpu=None, **options):
    """The fastest plan that fits: `headroom plan --json`, parsed (a Plan: a dict with apply())."""
    cap = None
    if not isinstance(model, str):
        options = dict(options)
        loss_fn = options.pop("loss_fn", None)
        if "batch" in options:
            raise Error("batch is read from example_inputs for a module")
        cap = model if isinstance(model, Capture) else _capture_for(model, example_inputs, loss_fn,
                                                                     options.get("mode", "train"))
        model, example_inputs = cap, None
    name, loader, pairs = _resolve(model, example_inputs, options)
    d = json.loads(_native.plan_json(name, pairs, loader, _text("budget", budget or ""),
                                     _text("activation_budget", activation_budget or ""),
                                     _text("strategy", strategy), _text("cost_gpu", cost_gpu or "")))
    return Plan(d, cap, options)


def _capture_for(model, example_inputs, loss_fn, mode):
    try:
        import torch
    except ImportError:
        raise Error("an nn.Module needs torch (Debian: python3-torch)") from None
    if not isinstance(model, torch.nn.Module):
        raise Error("model must be a built-in model name, an .onnx path, an nn.Module or a "
                    "headroom.capture(...) result, got " + type(model).__name__)
    if example_inputs is None:
        raise Error("an nn.Module needs example_inputs")
    return Capture(model, example_inputs, loss_fn, mode)


def trace(model, example_inputs=None, **options):
    """Every simulated allocation and free, one line each: `headroom estimate --trace`."""
    name, loader, pairs = _resolve(model, example_inputs, options)
    return _native.trace_text(name, pairs, loader)


def report(model, example_inputs=None, path=None, measured=None, **options):
    """Writes the HTML report of `headroom report` to `path` (atomically); `measured` is a
    `headroom watch` CSV/JSONL drawn over the predicted device total (`--measured`, needs `gpu`)."""
    if not isinstance(path, str) or not path:
        raise Error("report needs path='FILE.html'")
    if measured is not None and (not isinstance(measured, str) or not measured):
        raise Error("measured must be the path of a headroom watch file (.csv or .jsonl)")
    name, loader, pairs = _resolve(model, example_inputs, options)
    _native.report(name, pairs, loader, path, measured or "")


from .gemel import Merge, joint_train, merge, pack, unique_bytes  # noqa: E402  (gemel imports Capture from here)
