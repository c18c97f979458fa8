"""GEMEL end to end (Padmanabhan et al., NSDI 2023) on nn.Modules: pack's merge plan on captured
models (pack), the rewrite that makes each merged group one set of shared tensors (merge), and
the loop that merges the greedy prefix, retrains jointly and backs off until every model holds its
accuracy target (joint_train). docs/pack.md section 3 describes the loop.

Invariants:
- pack's plan is the C++ `pack` run on the captured graphs (one source of truth): the groups, their
  greedy order and bytes_saved come from src/pack/merge_plan.h, never recomputed here.
- A merge shares exactly the tensors pack counts as the layer's weights (its parameters and
  buffers, by the names capture gave them): each member's module slots then hold the first
  member's tensor objects, so the members' parameters are one nn.Parameter each. A BatchNorm's
  num_batches_tracked, which no op reads and pack counts as the model's own "other" memory, stays
  per model; so the unique bytes counted from storages (data_ptr) equal pack's prediction exactly.
- merge checks every member of every group before changing anything: a bad plan raises one
  headroom.Error and leaves the models as they were. joint_train restores every model to its
  weights before the call when it raises.
"""
import json
import math
import os
import sys
import tempfile
import time

from ._native import Error
from . import _native


# --- pack -----------------------------------------------------------------------------------------

def _per_model(models, example_inputs):
    """example_inputs as one entry per model: a list with one entry per model, or one shared."""
    if isinstance(example_inputs, list) and len(example_inputs) == len(models):
        return list(example_inputs)
    return [example_inputs] * len(models)


def _names(models, names):
    if names is None:
        names = [f"{i}:{type(m).__name__}" for i, m in enumerate(models)]
    names = list(names)
    if len(names) != len(models) or len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise Error("pack: names must be one distinct, non-empty text per model")
    return names


def pack(models, example_inputs=None, names=None, gpu=None, gpu_memory=None, workload=None, merged_groups=None):
    """`headroom pack --json` on captured modules, parsed: the merge plan (`groups`, greedy order,
    each with `bytes_saved` and `members`), residency with gpu/gpu_memory, the swap simulation
    with a workload file (models named by `names`, default "0:ClassName", ...). Each member also
    gets `index` (the model's position in `models`) and `weights` (the layer's parameter and
    buffer names), which merge() follows. Models are captured in inference mode."""
    from . import Capture
    import torch
    models = list(models)
    if not models:
        raise Error("pack needs at least one model")
    names = _names(models, names)
    caps = []
    for m, x in zip(models, _per_model(models, example_inputs)):
        if isinstance(m, Capture):
            if m.mode != "infer":
                raise Error("pack: capture the models with mode='infer' (pack plans inference)")
            caps.append(m)
            continue
        if not isinstance(m, torch.nn.Module):
            raise Error("pack: each model must be an nn.Module or a headroom.capture(..., mode='infer'), got " +
                        type(m).__name__)
        if x is None:
            raise Error("pack: an nn.Module needs example_inputs")
        caps.append(Capture(m, x, None, "infer"))
    batch = caps[0].batch
    graphs = [lambda b, c=c: c.graph(b) for c in caps]
    text, layers = _native.pack_json(names, graphs, batch, gpu or "", gpu_memory or "", workload or "",
                                     merged_groups)
    report = json.loads(text)
    for g in report["groups"]:
        for mb in g["members"]:
            i = names.index(mb["model"])
            by_name = dict(layers[i])
            mb["index"] = i
            mb["weights"] = list(by_name[mb["layer"]])
    return report


# --- merge ----------------------------------------------------------------------------------------

def _slots(model):
    """Every (module, store, key) slot of a model's parameters and buffers, by its dotted name, and
    the names under which each tensor object is held (tied weights hold one object twice)."""
    by_name, by_object = {}, {}
    for mod_name, mod in model.named_modules(remove_duplicate=False):
        for store in (mod._parameters, mod._buffers):
            for key, t in store.items():
                if t is None:
                    continue
                full = f"{mod_name}.{key}" if mod_name else key
                by_name[full] = (store, key, t)
                by_object.setdefault(id(t), []).append((store, key))
    return by_name, by_object


def unique_bytes(models):
    """Bytes of the distinct storages (by data_ptr) behind every parameter and buffer of `models`:
    what the models hold in memory together."""
    seen = {}
    for model in models:
        for mod in model.modules():
            for store in (mod._parameters, mod._buffers):
                for t in store.values():
                    if t is None:
                        continue
                    s = t.storage()
                    if s.nbytes() > 0:
                        seen[(t.device, s.data_ptr())] = s.nbytes()
    return sum(seen.values())


def _group_indices(plan, groups):
    n = len(plan["groups"])
    if groups is None:
        return list(range(n))
    if isinstance(groups, bool):
        raise Error(f"merge: groups must be a count or a list of group indices, got {groups!r}")
    if isinstance(groups, int):
        if not 0 <= groups <= n:
            raise Error(f"merge: groups={groups}: the plan has {n} groups")
        return list(range(groups))
    out = []
    for g in groups:
        if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < n:
            raise Error(f"merge: group index {g!r} is not in the plan (0..{n - 1})")
        if g in out:
            raise Error(f"merge: group {g} is listed twice")
        out.append(g)
    return out


class Merge:
    """The result of merge(): the models (rewritten in place), the groups merged (indices into the
    plan), the bytes saved counted from the storages and pack's prediction for them, and unmerge()
    to give members their own tensors back with their pre-merge values."""

    def __init__(self, models, plan, groups, before):
        self.models = models
        self.plan = plan
        self.groups = list(groups)
        self.unique_bytes_before = before
        self._undo = {}  # group index -> [(slots to restore, original tensor, pre-merge copy or None)]

    @property
    def predicted_saved_bytes(self):
        """pack's bytes_saved summed over the groups merged now."""
        return sum(self.plan["groups"][g]["bytes_saved"] for g in self.groups)

    @property
    def unique_bytes(self):
        return unique_bytes(self.models)

    @property
    def saved_bytes(self):
        return self.unique_bytes_before - self.unique_bytes

    def unmerge(self, groups=None):
        """Undoes the merge of `groups` (default: all merged): every member holds its own tensor
        again with the values it had before the merge (the first member's tensor, which the
        members shared and training changed, gets its pre-merge values back)."""
        import torch
        todo = list(self.groups) if groups is None else list(groups)
        for g in todo:
            if g not in self._undo:
                raise Error(f"unmerge: group {g} is not merged")
        with torch.no_grad():
            for g in todo:
                for slots, original, copy in self._undo.pop(g):
                    if copy is not None:
                        original.copy_(copy)
                    for store, key in slots:
                        store[key] = original
                self.groups.remove(g)

    def report(self):
        return {"groups": list(self.groups), "unique_bytes_before": self.unique_bytes_before,
                "unique_bytes": self.unique_bytes, "saved_bytes": self.saved_bytes,
                "predicted_saved_bytes": self.predicted_saved_bytes}


def merge(models, plan=None, groups=None, init="first", example_inputs=None, into=None):
    """Rewrites `models` (in place) so that the members of each chosen group of pack's plan hold
    one set of tensors: every member's parameter and buffer slots point at the first member's
    objects (shared nn.Parameters: one gradient, the sum of the members'). `plan` is a
    headroom.pack(...) result for these models (computed from example_inputs when None); `groups`
    a count (the greedy prefix) or a list of indices into plan["groups"] (default: all);
    init="first" keeps the first member's values, "average" their mean. Returns a Merge (`into`, a
    Merge of these models, adds the groups to it). Raises headroom.Error, changing nothing, when a
    planned layer no longer matches (a missing name, another shape or dtype)."""
    import torch
    models = list(models)
    if init not in ("first", "average"):
        raise Error(f"merge: init must be 'first' or 'average', got {init!r}")
    if plan is None:
        if example_inputs is None:
            raise Error("merge: give plan=headroom.pack(...) or example_inputs to make one")
        plan = pack(models, example_inputs)
    if len(plan.get("models", [])) != len(models):
        raise Error(f"merge: the plan is for {len(plan.get('models', []))} models, got {len(models)}")
    chosen = _group_indices(plan, groups)
    if into is not None and any(g in into.groups for g in chosen):
        raise Error("merge: a group is merged already")
    slots = [_slots(m) for m in models]

    # 1. Check everything first: each member's weights exist and match the first member's.
    work = []
    for g in chosen:
        group = plan["groups"][g]
        resolved = []
        for mb in group["members"]:
            i = mb.get("index")
            if not isinstance(i, int) or not 0 <= i < len(models):
                raise Error(f"merge: group {g} names model {mb.get('model')!r}, which is not one of the models")
            tensors = []
            for name in mb["weights"]:
                if name not in slots[i][0]:
                    raise Error(f"merge: group {g}: model {mb['model']} has no parameter or buffer '{name}' "
                                "(the plan no longer matches the model)")
                tensors.append(slots[i][0][name][2])
            resolved.append((i, tensors))
        first = resolved[0][1]
        for (i, tensors), mb in zip(resolved[1:], group["members"][1:]):
            if len(tensors) != len(first):
                raise Error(f"merge: group {g}: layer {mb['model']}:{mb['layer']} has {len(tensors)} weights, "
                            f"the first member {len(first)} (the plan no longer matches the models)")
            for a, b, name in zip(first, tensors, mb["weights"]):
                if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
                    raise Error(f"merge: group {g}: '{name}' of {mb['model']} is {list(b.shape)} {b.dtype} on "
                                f"{b.device}, the first member's {list(a.shape)} {a.dtype} on {a.device} (the plan no "
                                "longer matches the models)")
                if type(a) is not type(b):
                    raise Error(f"merge: group {g}: '{name}' of {mb['model']} is a {type(b).__name__}, the first "
                                f"member's a {type(a).__name__}")
                if a is b:
                    raise Error(f"merge: group {g}: '{name}' of {mb['model']} is already the first member's tensor "
                                "(merged before, or one model given twice)")
        work.append((g, resolved))

    # 2. Apply. Nothing below raises on input.
    merged = into if into is not None else Merge(models, plan, [], unique_bytes(models))
    with torch.no_grad():
        for g, resolved in work:
            first_model, shared = resolved[0]
            undo = []
            # The shared tensors continue as the first member's objects: keep their values to undo.
            for t in shared:
                undo.append(([], t, t.detach().clone()))
            if init == "average":
                for k, t in enumerate(shared):
                    if t.is_floating_point():
                        t.copy_(torch.stack([r[1][k].detach() for r in resolved]).mean(dim=0))
            for i, tensors in resolved[1:]:
                for t, s in zip(tensors, shared):
                    held = slots[i][1][id(t)]  # every slot of model i holding t (tying kept)
                    for store, key in held:
                        store[key] = s
                    undo.append((held, t, None))
            merged._undo[g] = undo
            merged.groups.append(g)
    return merged


# --- joint_train ----------------------------------------------------------------------------------

def accuracy(model, loader):
    """Share of samples whose argmax of the output equals the target (classification)."""
    import torch
    right = total = 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            right += int((out.argmax(dim=1) == y).sum())
            total += int(y.numel())
    if total == 0:
        raise Error("evaluation: the validation loader gave no samples")
    return right / total


def _check_loader(loader, what):
    try:
        n = len(loader)
    except TypeError:
        return
    if n == 0:
        raise Error(f"joint_train: {what} is empty")


class _Cycle:
    """Round-robin batches: an endless walk through a loader, re-iterating it when it ends."""

    def __init__(self, loader, what):
        self.loader = loader
        self.what = what
        self.it = iter(loader)

    def next(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            try:
                return next(self.it)
            except StopIteration:
                raise Error(f"joint_train: {self.what} gave no batch") from None


def _snapshot(models):
    """Every parameter and buffer slot of the models with its object and a copy of its values."""
    snap = []
    for model in models:
        for mod in model.modules():
            for store in (mod._parameters, mod._buffers):
                for key, t in store.items():
                    if t is not None:
                        snap.append((store, key, t, t.detach().clone()))
    return snap


def _restore(snap):
    import torch
    with torch.no_grad():
        for store, key, t, copy in snap:
            store[key] = t
            t.copy_(copy)


def _budget(budget):
    if budget is None:
        budget = {}
    if not isinstance(budget, dict) or set(budget) - {"epochs", "seconds", "rounds"}:
        raise Error("joint_train: budget must be a dict with 'epochs' (per round), 'seconds' (in all) and/or 'rounds'")
    epochs = budget.get("epochs", 1)
    seconds = budget.get("seconds")
    rounds = budget.get("rounds", 16)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise Error(f"joint_train: budget epochs must be a positive integer, got {epochs!r}")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
        raise Error(f"joint_train: budget seconds must be a positive number, got {seconds!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise Error(f"joint_train: budget rounds must be a positive integer, got {rounds!r}")
    return epochs, seconds, rounds


def _mib(n):
    return f"{n / 2**20:.2f} MiB"


def joint_train(models, loaders, losses, val_loaders, targets=None, metrics=None, weights=None, budget=None,
                plan=None, example_inputs=None, optimizer=None, init="first", tolerance=0.01, log_path=None,
                quiet=False):
    """GEMEL's loop on `models` (each already trained for its task). Round: merge the greedy prefix
    of pack's groups (all groups first), train all models jointly for budget["epochs"] epochs on
    sum_m weights[m] * losses[m](models[m](x_m), y_m) with one batch of each loader per step
    (round-robin; an epoch is as many steps as the longest loader) and one optimizer over the
    union of parameters (shared ones once); evaluate metrics[m](models[m], val_loaders[m]) (default
    accuracy); if every model reaches targets[m] (default: its accuracy before merging minus
    `tolerance`) the round is kept and the loop ends; otherwise the prefix is halved, the groups
    beyond it are unmerged with their pre-merge weights, and the next round retrains. Stops at a
    kept round, at zero groups (every model restored to its weights before the call), or when the
    budget (seconds in all, rounds) runs out (then too). Returns the log (a dict; also written to
    log_path as JSON) with one entry per round; the models are left merged as the last kept
    round. quiet=True prints no progress lines."""
    import torch
    models = list(models)
    n = len(models)
    for what, seq in (("loaders", loaders), ("losses", losses), ("val_loaders", val_loaders)):
        if len(seq) != n:
            raise Error(f"joint_train: {what} has {len(seq)} entries for {n} models")
    for i in range(n):
        _check_loader(loaders[i], f"loader {i}")
        _check_loader(val_loaders[i], f"validation loader {i}")
    metrics = list(metrics) if metrics is not None else [accuracy] * n
    weights = list(weights) if weights is not None else [1.0] * n
    if len(metrics) != n or len(weights) != n:
        raise Error(f"joint_train: metrics and weights need one entry per model ({n})")
    if targets is not None and len(targets) != n:
        raise Error(f"joint_train: targets has {len(targets)} entries for {n} models")
    epochs, seconds, max_rounds = _budget(budget)
    make_optimizer = optimizer or (lambda params: torch.optim.Adam(params, lr=1e-3))
    if plan is None:
        if example_inputs is None:
            raise Error("joint_train: give plan=headroom.pack(...) or example_inputs to make one")
        plan = pack(models, example_inputs)
    if log_path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(log_path))):
        raise Error(f"joint_train: log_path {log_path}: no such folder")
    if len(plan.get("models", [])) != n:
        raise Error(f"joint_train: the plan is for {len(plan.get('models', []))} models, got {n}")

    start = time.monotonic()
    snap = _snapshot(models)
    flags = [m.training for m in models]

    def evaluate():
        accs = []
        for m, metric, val in zip(models, metrics, val_loaders):
            m.eval()
            try:
                accs.append(float(metric(m, val)))
            finally:
                m.train()
        return accs

    def say(text):
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    log = {"models": [m["model"] for m in plan["models"]], "plan_groups": len(plan["groups"]),
           "plan_saved_bytes": plan["saved_bytes"], "unshared_bytes": None, "rounds": []}
    state = None
    try:
        before = evaluate()
        if targets is None:
            targets = [a - tolerance for a in before]
        targets = [float(t) for t in targets]
        missing = [i for i in range(n) if before[i] < targets[i]]
        if missing:
            i = missing[0]
            raise Error(f"joint_train: model {log['models'][i]} reaches {before[i]:.4f} before any merge, below its "
                        f"target {targets[i]:.4f}: no merge can be kept")
        log["accuracy_before"] = before
        log["targets"] = targets
        state = merge(models, plan, groups=0)
        log["unshared_bytes"] = state.unique_bytes_before
        prefix = len(plan["groups"])
        kept = False
        while True:
            r0 = time.monotonic()
            if prefix > len(state.groups):
                merge(models, plan, groups=list(range(len(state.groups), prefix)), init=init, into=state)
            elif prefix < len(state.groups):
                state.unmerge(list(range(prefix, len(state.groups))))
            if prefix == 0:
                _restore(snap)  # nothing merged holds: every model as before the call
                accs = before
                rnd = {"round": len(log["rounds"]) + 1, "groups": 0, "saved_bytes": 0, "predicted_saved_bytes": 0,
                       "accuracy": accs, "kept": True, "seconds": round(time.monotonic() - r0, 3),
                       "note": "every merge backed off; models restored"}
                log["rounds"].append(rnd)
                say(f"gemel round {rnd['round']}: no merge holds the targets; models restored")
                kept = True
                break
            params, seen = [], set()
            for m in models:
                for p in m.parameters():  # one model's parameters are distinct objects; shared ones repeat
                    if p.requires_grad and id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
            opt = make_optimizer(params)
            cycles = [_Cycle(l, f"loader {i}") for i, l in enumerate(loaders)]
            steps = max(len(l) if hasattr(l, "__len__") else 1 for l in loaders)
            for m in models:
                m.train()
            for _ in range(epochs * steps):
                opt.zero_grad(set_to_none=True)
                total = 0
                for i, m in enumerate(models):
                    x, y = cycles[i].next()
                    total = total + weights[i] * losses[i](m(x), y)
                total.backward()
                opt.step()
            accs = evaluate()
            ok = all(a >= t for a, t in zip(accs, targets))
            rnd = {"round": len(log["rounds"]) + 1, "groups": prefix, "saved_bytes": state.saved_bytes,
                   "predicted_saved_bytes": state.predicted_saved_bytes, "accuracy": accs, "kept": ok,
                   "seconds": round(time.monotonic() - r0, 3)}
            log["rounds"].append(rnd)
            accs_text = " ".join(f"{a:.4f}" for a in accs)
            say(f"gemel round {rnd['round']}: {prefix} of {len(plan['groups'])} groups merged, "
                f"{_mib(rnd['saved_bytes'])} saved, accuracy {accs_text} -> {'kept' if ok else 'backed off'}")
            if ok:
                kept = True
                break
            out_of_time = seconds is not None and time.monotonic() - start >= seconds
            if out_of_time or len(log["rounds"]) >= max_rounds:
                _restore(snap)
                state.groups, state._undo = [], {}
                log["stopped"] = "budget exhausted; models restored"
                say("gemel: budget exhausted before a round held the targets; models restored")
                break
            prefix //= 2
    except BaseException:
        _restore(snap)  # never leave a model half-merged or half-trained
        for m, f in zip(models, flags):
            m.train(f)
        raise
    for m, f in zip(models, flags):
        m.train(f)
    log["kept"] = kept
    log["merged_groups"] = list(state.groups)
    log["saved_bytes"] = state.saved_bytes
    log["predicted_saved_bytes"] = state.predicted_saved_bytes
    log["seconds"] = round(time.monotonic() - start, 3)
    log["merge"] = state
    if log_path is not None:
        _write_json(log_path, {k: v for k, v in log.items() if k != "merge"})
    return log


def _write_json(path, obj):
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".headroom-")
    except OSError as e:
        raise Error(f"joint_train: cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
