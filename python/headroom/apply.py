"""Applying a plan's checkpointing and offloading to the user's nn.Module.

The planner decides per op (keep, recompute); PyTorch checkpoints callables. A plan is applied at
module granularity: a module all of whose ops are recomputed is called through
torch.utils.checkpoint.checkpoint (reentrant, 1.13's default, or use_reentrant=False when asked:
headroom models both, --checkpoint-impl), and
inside an nn.Sequential a run of consecutive children all recomputed is one checkpoint. Recomputed
ops that no such module or run covers are kept. What was applied is returned as headroom
--checkpoint ranges, so the applied model is re-estimated by the same simulation (never assumed
equal to the plan).

Offloading is applied at module granularity too: a module all of whose planned ops are offloaded
runs its forward inside torch.autograd.graph.save_on_cpu(pin_memory=True), so what autograd saves
there is copied to (pinned) host memory and brought back for the backward. Offloaded ops that no
such module covers are kept on the device and reported as not applied; what was applied is
returned as headroom --offload op names for the same re-simulation.

Invariants: a segment never contains the model's first op (with reentrant checkpoint, a segment
none of whose inputs requires grad gives its parameters no gradient) and never starts with an
in-place module (its re-run would need the input it overwrote); the module's parameters and
numerics are unchanged (checkpoint preserves the RNG state, so dropout masks are the same).
"""
import functools

import torch
from torch.utils.checkpoint import checkpoint

from ._native import Error


def _ckpt_call(use_reentrant, forward, *args):
    return checkpoint(forward, *args, use_reentrant=use_reentrant)


def _sequential_forward(runs, use_reentrant, self, x):
    # nn.Sequential.forward (`for module in self: input = module(input)`) with runs checkpointed.
    mods = list(self)

    def segment(a, b):
        def run(h):
            for m in mods[a:b + 1]:
                h = m(h)
            return h
        return run

    i = 0
    for a, b in runs:
        for m in mods[i:a]:
            x = m(x)
        x = checkpoint(segment(a, b), x, use_reentrant=use_reentrant)
        i = b + 1
    for m in mods[i:]:
        x = m(x)
    return x


class ModuleOps:
    """The op ids of each module path in a lowered capture: a call's ops belong to its module and
    to every module above it."""

    def __init__(self, lowering):
        self.op_names = lowering.graph_op_names
        self.ranges = {}
        first = 0
        for call, last in zip(lowering.t.calls, lowering.last_op):
            if last >= first:
                path = call.module
                parts = path.split(".") if path else []
                for k in range(len(parts) + 1):
                    p = ".".join(parts[:k])
                    lo, hi = self.ranges.get(p, (last + 1, -1))
                    self.ranges[p] = (min(lo, first), max(hi, last))
            first = max(first, last + 1)

    def of(self, path):
        return self.ranges.get(path)


def choose(model, mops, recompute):
    """[(kind, module path, a, b)]: whole modules ("module", path) and Sequential runs
    ("run", path, a, b), largest first, never containing op 0."""
    chosen = []

    def all_recomputed(rng):
        return rng is not None and rng[0] > 0 and all(mops.op_names[i] in recompute for i in range(rng[0], rng[1] + 1))

    def in_place(mod):
        # nn.ReLU(inplace=True) and the like overwrite their input, which checkpoint keeps for the
        # re-run: PyTorch refuses in the backward ("a leaf Variable that requires grad is being
        # used in an in-place operation"), and headroom's validate_plan rejects such a region.
        return bool(getattr(mod, "inplace", False))

    def visit(path, mod):
        rng = mops.of(path)
        if path and all_recomputed(rng):
            if not in_place(mod):
                chosen.append(("module", path, None, None))
            return
        children = list(mod.named_children())
        if isinstance(mod, torch.nn.Sequential):
            i = 0
            while i < len(children):
                j = i
                while j < len(children) and all_recomputed(mops.of(_join(path, children[j][0]))) and \
                        not (j == i and in_place(children[j][1])):
                    j += 1
                if j - i >= 2:
                    chosen.append(("run", path, i, j - 1))
                    i = j
                    continue
                visit(_join(path, children[i][0]), children[i][1])
                i += 1
            return
        for name, child in children:
            visit(_join(path, name), child)

    visit("", model)
    return chosen


def _join(path, name):
    return f"{path}.{name}" if path else name


def ranges(mops, chosen, model):
    """headroom --checkpoint ranges (FIRST..LAST op names) of the chosen segments."""
    out = []
    for kind, path, a, b in chosen:
        if kind == "module":
            lo, hi = mops.of(path)
        else:
            names = [n for n, _ in model.get_submodule(path).named_children()] if path else \
                [n for n, _ in model.named_children()]
            lo = mops.of(_join(path, names[a]))[0]
            hi = mops.of(_join(path, names[b]))[1]
        out.append(f"{mops.op_names[lo]}..{mops.op_names[hi]}")
    return out


def apply_segments(model, chosen, use_reentrant=True):
    runs = {}
    for kind, path, a, b in chosen:
        mod = model.get_submodule(path) if path else model
        if kind == "module":
            mod.forward = functools.partial(_ckpt_call, use_reentrant, mod.forward)
        else:
            runs.setdefault(path, []).append((a, b))
    for path, rs in runs.items():
        mod = model.get_submodule(path) if path else model
        mod.forward = functools.partial(_sequential_forward, sorted(rs), use_reentrant, mod)
    return model


def recomputed_ops(plan):
    return {d["layer"] for d in plan.get("decisions", {}).get("layers", []) if d["action"] == "recompute"}


def planned_actions(plan):
    """op name -> the plan's action (keep, recompute, offload) for the ops the plan lists."""
    return {d["layer"]: d["action"] for d in plan.get("decisions", {}).get("layers", [])}


def choose_offload(model, mops, actions):
    """Module paths to run under save_on_cpu, largest first: modules whose planned ops are all
    offloaded (ops the plan does not list, views, save nothing), and the offloaded op names they
    cover."""
    chosen, covered = [], []

    def planned(rng):
        return [] if rng is None else [mops.op_names[i] for i in range(rng[0], rng[1] + 1)
                                       if mops.op_names[i] in actions]

    def visit(path, mod):
        ops = planned(mops.of(path))
        if path and ops and all(actions[n] == "offload" for n in ops):
            chosen.append(path)
            covered.extend(ops)
            return
        for name, child in mod.named_children():
            visit(_join(path, name), child)

    visit("", model)
    return chosen, covered


def _offload_call(forward, *args, **kwargs):
    # pin_memory=True pins the host copies when CUDA is there (save_on_cpu pins only then).
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        return forward(*args, **kwargs)


def is_offloaded(module):
    """Whether apply wrapped this module's forward in save_on_cpu."""
    f = module.__dict__.get("forward")
    return isinstance(f, functools.partial) and f.func is _offload_call


def apply_offload(model, paths):
    for path in paths:
        mod = model.get_submodule(path) if path else model
        mod.forward = functools.partial(_offload_call, mod.forward)
    return model
