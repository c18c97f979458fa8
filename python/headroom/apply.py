"""Applying a plan's checkpointing and offloading to the user's nn.Module.

The planner decides checkpoint regions over ops, possibly nested (a region inside another: a
checkpointed function that itself calls checkpoint, Rotor's persistent schedules); PyTorch
checkpoints callables. Each planned region (the plan's decisions.checkpoint_regions, outer
first) is realised at module granularity: a module all of whose ops are in the region is called
through torch.utils.checkpoint.checkpoint (reentrant, 1.13's default, or use_reentrant=False when
asked: headroom models both, --checkpoint-impl), and inside an nn.Sequential a run of consecutive
children all in the region is one checkpoint call. Nesting is kept: an inner region's module or
run lies inside its outer region's, so its checkpoint call is made from inside the outer call's
function (a wrapped child module, or a run inside the run's function), exactly the nested calls
the interpreter replays. Ops of a region that no such module or run covers are not checkpointed.
What was applied is returned as headroom --checkpoint ranges (nested ranges included), so the
applied model is re-estimated by the same simulation (never assumed equal to the plan).

Offloading is applied at module granularity too: a module all of whose planned ops are offloaded
runs its forward inside torch.autograd.graph.save_on_cpu(pin_memory=True), so what autograd saves
there is copied to (pinned) host memory and brought back for the backward. Offloaded ops that no
such module covers are kept on the device and reported as not applied; what was applied is
returned as headroom --offload op names for the same re-simulation.

Invariants: a segment never contains the model's first op (with reentrant checkpoint, a segment
none of whose inputs requires grad gives its parameters no gradient) and never starts with an
in-place module (its re-run would need the input it overwrote); the applied segments are well
nested (disjoint or one inside the other) and distinct; the module's parameters and numerics are
unchanged (checkpoint preserves the RNG state, so dropout masks are the same).
"""
import functools

import torch
from torch.utils.checkpoint import checkpoint

from ._native import Error


def _ckpt_call(use_reentrant, forward, *args):
    return checkpoint(forward, *args, use_reentrant=use_reentrant)


def _outermost(runs):
    """The runs (sorted: first ascending, enclosing first) that no other run contains, each with
    the runs inside it."""
    out = []
    for a, b in runs:
        if out and out[-1][0][0] <= a and b <= out[-1][0][1]:
            out[-1][1].append((a, b))
        else:
            out.append(((a, b), []))
    return out


def _sequential_forward(runs, use_reentrant, self, x):
    # nn.Sequential.forward (`for module in self: input = module(input)`) with runs checkpointed;
    # a run inside another is checkpointed from inside the outer run's function (nested calls).
    mods = list(self)

    def span(a, b, inner):
        def run(h):
            i = a
            for (c, d), nested in _outermost(inner):
                for m in mods[i:c]:
                    h = m(h)
                h = checkpoint(span(c, d, nested), h, use_reentrant=use_reentrant)
                i = d + 1
            for m in mods[i:b + 1]:
                h = m(h)
            return h
        return run

    return span(0, len(mods) - 1, sorted(runs, key=lambda r: (r[0], -r[1])))(x)


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


def choose(model, mops, lo, hi):
    """The modules and Sequential runs all of whose ops lie in ops lo..hi, largest first, never
    containing op 0: [(kind, module path, a, b)], whole modules ("module", path, None, None) and
    runs of children ("run", path, a, b)."""
    chosen = []

    def all_recomputed(rng):
        return rng is not None and rng[0] > 0 and lo <= rng[0] and rng[1] <= hi

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


def op_range(mops, model, c):
    """The (first, last) op ids a chosen module or run covers."""
    kind, path, a, b = c
    if kind == "module":
        return mops.of(path)
    names = [n for n, _ in (model.get_submodule(path) if path else model).named_children()]
    return mops.of(_join(path, names[a]))[0], mops.of(_join(path, names[b]))[1]


def choose_regions(model, mops, regions):
    """The modules and runs realising the plan's checkpoint regions ("FIRST..LAST" op names, outer
    before inner), outer before inner: each region's largest modules and runs (choose), less any
    that another already chosen covers exactly or crosses (a run cut differently), so that what is
    applied is well nested."""
    index = {n: i for i, n in enumerate(mops.op_names)}
    chosen, spans = [], []
    for region in regions:
        first, _, last = region.partition("..")
        if first not in index or last not in index:
            raise Error(f"plan.apply: the plan's region {region!r} names ops the module's capture does not have")
        for c in choose(model, mops, index[first], index[last]):
            lo, hi = op_range(mops, model, c)
            if any((lo, hi) == s or (s[0] < lo <= s[1] < hi) or (lo < s[0] <= hi < s[1]) for s in spans):
                continue
            chosen.append(c)
            spans.append((lo, hi))
    order = sorted(range(len(chosen)), key=lambda k: (spans[k][0], -spans[k][1]))
    return [chosen[k] for k in order]


def ranges(mops, chosen, model):
    """headroom --checkpoint ranges (FIRST..LAST op names) of the chosen segments."""
    out = []
    for c in chosen:
        lo, hi = op_range(mops, model, c)
        out.append(f"{mops.op_names[lo]}..{mops.op_names[hi]}")
    return out


def apply_segments(model, chosen, use_reentrant=True):
    # Runs first: a Sequential's forward becomes the run-checkpointing one, and a module that is
    # itself a segment then wraps that forward (its call checkpoints the whole, the runs inside).
    runs = {}
    for kind, path, a, b in chosen:
        if kind == "run":
            runs.setdefault(path, []).append((a, b))
    for path, rs in runs.items():
        mod = model.get_submodule(path) if path else model
        mod.forward = functools.partial(_sequential_forward, rs, use_reentrant, mod)
    for kind, path, a, b in chosen:
        if kind == "module":
            mod = model.get_submodule(path) if path else model
            mod.forward = functools.partial(_ckpt_call, use_reentrant, mod.forward)
    return model


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
