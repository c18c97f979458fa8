"""Exact measurement of live PyTorch CPU tensor storage (headroom validation).

Primary method -- torch.profiler(profile_memory=True):
    c10's DefaultCPUAllocator reports every allocation and free of a CPU
    storage (exact requested nbytes, +alloc / -free, plus the allocator's own
    running total) to the profiler.  We take the profiler's event tree
    (kineto_results.experimental_event_tree()), walk it in time order and
    replay the [memory] events: running total, peaks, and for every block the
    op chain / autograd node / nn.Module that allocated it.  The replayed
    running total is checked against the allocator's own `total_allocated`
    after every event (an ordering/completeness check; any mismatch raises).

Phase boundaries and module scopes are marked with `aten::is_set_to`, an op
that allocates nothing, so markers cannot perturb what is measured.

Cross-check -- LD_PRELOAD shim (alloc_counter.c): when the process runs with
the shim preloaded, the shim's counters are read (and their peaks reset) at
every marker; the c10 category (posix_memalign called from libc10.so) gives an
independent peak per phase, which is compared with the profiler's.
"""
import ctypes
import gc
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

# ---------------------------------------------------------------------------
# LD_PRELOAD shim access
# ---------------------------------------------------------------------------
SHIM_CATS = ("c10", "aligned", "malloc", "mmap")


class Shim:
    """ctypes view of alloc_counter.so (None-safe: .ok False when not preloaded)."""

    def __init__(self):
        self.ok = False
        try:
            lib = ctypes.CDLL(None)
            self._read = lib.ac_read
            self._reset = lib.ac_reset_peaks
            self._n = lib.ac_nfields()
            self._big = lib.ac_big_events
            self._big.restype = ctypes.c_int64
            self._lib = lib
            self.ok = True
        except (AttributeError, OSError):
            return
        self._buf = (ctypes.c_int64 * self._n)()

    def read(self):
        """-> tuple(cur[4], peak[4], calls[4], unmatched_free, table_full)"""
        self._read(self._buf)
        b = list(self._buf)
        return b[0:4], b[4:8], b[8:12], b[12], b[13]

    def reset_peaks(self):
        self._reset()

    def big_events(self, n=4096):
        buf = (ctypes.c_int64 * (3 * n))()
        k = self._big(buf, n)
        return [(buf[3 * i], buf[3 * i + 1], SHIM_CATS[buf[3 * i + 2]]) for i in range(k)]


def describe_address(addr):
    """Shared object containing a code address (for the shim's big-event log)."""
    class Dl_info(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    libdl = ctypes.CDLL("libc.so.6")
    info = Dl_info()
    if libdl.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)):
        f = (info.dli_fname or b"?").decode()
        s = (info.dli_sname or b"").decode()
        return os.path.basename(f) + (f":{s}" if s else "")
    return hex(addr)


# ---------------------------------------------------------------------------
# Recorder: profiler session + zero-allocation markers
# ---------------------------------------------------------------------------
_MARK_T = torch.empty(0)  # 0-element: no storage, is_set_to on it allocates nothing


def _marker_op():
    _MARK_T.is_set_to(_MARK_T)  # shows up as 'aten::is_set_to' in the trace


MARKER_OP = "aten::is_set_to"


class Recorder:
    """with Recorder() as r: ... r.mark('phase') ...;  then r.trace (list of events)."""

    def __init__(self, use_shim=True):
        self.shim = Shim() if use_shim else None
        if self.shim is not None and not self.shim.ok:
            self.shim = None
        self.marks = []        # names, in order
        self.shim_at_mark = []  # (cur[4], peak_since_previous_mark[4]) per mark
        self.prof = None
        self.trace = None
        self._hooks = []

    def __enter__(self):
        self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self.prof.__enter__()
        self.mark("P:start")
        return self

    def mark(self, name):
        if self.shim is not None:
            cur, peak, _, _, _ = self.shim.read()
            self.shim.reset_peaks()
            self.shim_at_mark.append((cur, peak))
        self.marks.append(name)
        _marker_op()

    def hook_modules(self, model, prefix=""):
        """Mark entry/exit of every submodule forward (markers allocate nothing)."""
        for name, mod in model.named_modules(prefix=prefix):
            label = name or type(mod).__name__
            self._hooks.append(mod.register_forward_pre_hook(
                lambda m, inp, _l=label: self.mark("M+" + _l)))
            self._hooks.append(mod.register_forward_hook(
                lambda m, inp, out, _l=label: self.mark("M-" + _l)))

    def unhook(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def __exit__(self, *exc):
        self.mark("P:stop")
        self.prof.__exit__(*exc)
        self.unhook()
        if exc[0] is None:
            self.trace = flatten(self.prof)
            self.prof = None  # drop profiler data (can be large)
        return False


# ---------------------------------------------------------------------------
# event tree -> flat, time-ordered trace
# ---------------------------------------------------------------------------
EVAL_PREFIX = "autograd::engine::evaluate_function: "


def flatten(prof):
    """-> list of events in execution order:
         ('mark',)                                        one per Recorder.mark
         ('mem', nbytes, ptr, total_allocated, chain)     chain = tuple of enclosing op names
    """
    roots = prof.profiler.kineto_results.experimental_event_tree()
    out = []
    tids = set()
    stack = [(r, ()) for r in sorted(roots, key=lambda e: e.start_time_ns, reverse=True)]
    while stack:
        ev, chain = stack.pop()
        tag = str(ev.tag)
        tids.add(ev.start_tid)
        if tag.endswith("Allocation"):
            f = ev.extra_fields
            if str(f.device).startswith("cpu"):
                out.append(("mem", int(f.alloc_size), int(f.ptr), int(f.total_allocated), chain))
            continue
        name = ev.name
        # A marker is a top-level is_set_to, or one nested only in non-aten scopes: module hooks
        # fire inside torch.utils.checkpoint's CheckpointFunction (forward) and
        # CheckpointFunctionBackward (recompute). Never one that an aten op calls.
        if name == MARKER_OP and not any(n.startswith("aten::") for n in chain):
            out.append(("mark",))
            continue
        kids = sorted(ev.children, key=lambda e: e.start_time_ns, reverse=True)
        sub = chain + (name,)
        stack.extend((k, sub) for k in kids)
    if len(tids) > 1:
        # Only a problem if allocations interleave across threads; the
        # total_allocated check in replay() would catch a misordering.
        pass
    return out


def op_label(chain):
    """Compact attribution: '[context: ]outermost aten op > innermost op', where
    context is the autograd node (backward) or the optimizer's record_function."""
    ctx = None
    ops = []
    for n in chain:
        if n.startswith(EVAL_PREFIX):
            ctx = n[len(EVAL_PREFIX):]
            ops = []
            continue
        if ctx is not None and n == ctx:
            continue
        if n.startswith("Optimizer."):
            ctx = n
            ops = []
            continue
        ops.append(n)
    if not ops:
        s = "<python>"
    elif len(ops) == 1:
        s = ops[0]
    else:
        s = ops[0] + " > " + ops[-1]
    return f"{ctx}: {s}" if ctx else s


def full_label(chain):
    return " > ".join(chain) if chain else "<python>"


# ---------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------
class Replay:
    """Replays a trace. Phases are the marks named 'P:...'; 'M+x'/'M-x' marks
    maintain the nn.Module path used for attribution."""

    def __init__(self, trace, marks):
        self.trace = trace
        self.marks = marks
        nmark = sum(1 for e in trace if e[0] == "mark")
        if nmark != len(marks):
            raise RuntimeError(f"marker mismatch: {nmark} marker ops in trace, {len(marks)} marks recorded")
        self._run()

    def _run(self):
        live = {}          # ptr -> (bytes, alloc_index)
        self.allocs = []   # index -> (bytes, chain, module path, phase name)
        cur = 0
        offset = None
        phase = None
        mod_stack = []
        self.phases = []   # dicts: name, start, peak, end, peak_event
        self.mark_live = []  # live bytes at each mark
        self.n_alloc = self.n_free = 0
        mi = 0
        for i, e in enumerate(self.trace):
            if e[0] == "mark":
                name = self.marks[mi]
                self.mark_live.append(cur)
                mi += 1
                if name.startswith("P:"):
                    if phase is not None:
                        phase["end"] = cur
                    phase = dict(name=name[2:], start=cur, peak=cur, end=None, peak_event=i, mark_index=mi - 1)
                    self.phases.append(phase)
                elif name.startswith("M+"):
                    mod_stack.append(name[2:])
                elif name.startswith("M-"):
                    if mod_stack and mod_stack[-1] == name[2:]:
                        mod_stack.pop()
                continue
            _, nb, ptr, total, chain = e
            if nb > 0:
                if ptr in live:
                    raise RuntimeError(f"allocation of live pointer {ptr:#x}")
                live[ptr] = (nb, len(self.allocs))
                self.allocs.append((nb, chain, mod_stack[-1] if mod_stack else "", phase["name"] if phase else "?"))
                cur += nb
                self.n_alloc += 1
            else:
                got = live.pop(ptr, None)
                if got is None:
                    raise RuntimeError(f"free of unknown pointer {ptr:#x} ({nb} bytes)")
                if got[0] != -nb:
                    raise RuntimeError(f"free size mismatch at {ptr:#x}: {got[0]} vs {-nb}")
                cur += nb
                self.n_free += 1
            if offset is None:
                offset = total - cur
            elif total - cur != offset:
                raise RuntimeError(f"replayed total {cur} disagrees with allocator total {total} "
                                   f"(offset {total - cur} != {offset}) at event {i}")
            if phase is not None and cur > phase["peak"]:
                phase["peak"] = cur
                phase["peak_event"] = i
        if phase is not None and phase["end"] is None:
            phase["end"] = cur
        self.final_live = cur
        self.allocator_offset = offset or 0

    def phase(self, name):
        for p in self.phases:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def live_at(self, event_index):
        """Blocks alive right after trace[event_index] -> list of alloc indices."""
        live = {}
        n = 0
        for i in range(event_index + 1):
            e = self.trace[i]
            if e[0] != "mem":
                continue
            if e[1] > 0:
                live[e[2]] = n
                n += 1
            else:
                live.pop(e[2])
        return sorted(live.values())


# ---------------------------------------------------------------------------
# case execution
# ---------------------------------------------------------------------------
def make_optimizer(kind, params, foreach):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01, foreach=foreach)
    if kind == "momentum":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=foreach)
    if kind == "adam":
        return torch.optim.Adam(params, foreach=foreach)
    if kind == "adamw":
        return torch.optim.AdamW(params, foreach=foreach)
    raise ValueError(kind)


def run_case(case, use_shim=True, hook_modules=True, steps=2):
    """Builds the model and runs inference or `steps` training steps inside a
    Recorder. Returns (recorder, replay, info)."""
    import models
    # Intra-op threads: 1 unless the case says (captured.py's 2-thread cases); more than one
    # changes which CPU convolution kernel runs.
    torch.set_num_threads(case.get("threads") or 1)
    torch.manual_seed(0)
    gc.collect()
    rec = Recorder(use_shim=use_shim)
    t0 = time.time()
    with rec:
        model, x, y, loss_fn = models.build(case["model"], case["batch"], case.get("seq"),
                                            dropout=case.get("dropout", True),
                                            checkpoint=case.get("checkpoint_scheme"))
        train = case["mode"] == "train"
        if not train:
            del y  # inference has no loss target: only weights and inputs make the baseline
        model.train(train)
        opt = make_optimizer(case["optimizer"], model.parameters(), case["foreach"]) if train else None
        if hook_modules:
            rec.hook_modules(model)
        gc.collect()
        gc.disable()
        try:
            t_build = time.time() - t0
            rec.mark("P:baseline")
            if not train:
                with torch.no_grad():
                    rec.mark("P:infer:forward")
                    out = model(x)
                    del out
            else:
                for s in range(1, steps + 1):
                    # ---- an ordinary training step ----
                    rec.mark(f"P:step{s}:forward")
                    out = model(x)
                    loss = loss_fn(out, y)
                    rec.mark(f"P:step{s}:backward")
                    loss.backward()
                    del out, loss
                    rec.mark(f"P:step{s}:optimizer")
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            rec.mark("P:end")
        finally:
            gc.enable()
        t_run = time.time() - t0 - t_build
    info = dict(build_seconds=round(t_build, 2), run_seconds=round(t_run, 2),
                param_bytes=None)
    rp = Replay(rec.trace, rec.marks)
    return rec, rp, info


PHASE_KEYS = ("forward", "backward", "optimizer")


def _top_alive(rp, idx_list, baseline_set, limit=30):
    items = []
    for ai in idx_list:
        if ai in baseline_set:
            continue
        nb, chain, mod, ph = rp.allocs[ai]
        items.append((nb, ai))
    items.sort(key=lambda t: (-t[0], t[1]))
    top = []
    for nb, ai in items[:limit]:
        _, chain, mod, ph = rp.allocs[ai]
        d = dict(bytes=nb, op=op_label(chain), phase=ph)
        if mod:
            d["module"] = mod
        top.append(d)
    # grouped view: same (phase, op) summed
    groups = {}
    for nb, ai in items:
        _, chain, mod, ph = rp.allocs[ai]
        k = (ph, op_label(chain))
        g = groups.setdefault(k, [0, 0])
        g[0] += nb
        g[1] += 1
    grouped = [dict(phase=k[0], op=k[1], bytes=v[0], count=v[1]) for k, v in groups.items()]
    grouped.sort(key=lambda d: (-d["bytes"], d["phase"], d["op"]))
    return top, grouped[:limit], items


def analyze(case, rec, rp):
    """-> the `measured` object of measured.json."""
    base = rp.phase("baseline")
    baseline_bytes = base["end"]
    # allocation indices that exist at the baseline mark
    base_mark_event = [i for i, e in enumerate(rp.trace) if e[0] == "mark"][base["mark_index"]]
    baseline_live = set(rp.live_at(base_mark_event))

    phases = [p for p in rp.phases if p["name"] not in ("start", "baseline", "end", "stop")]
    if not phases:
        raise RuntimeError("no measured phases")
    top = max(phases, key=lambda p: (p["peak"], -p["peak_event"]))
    peak_bytes = top["peak"]
    # first phase that reaches the overall peak
    first = next(p for p in phases if p["peak"] == peak_bytes)
    peak_name = first["name"]
    m = dict(baseline_bytes=baseline_bytes, peak_bytes=peak_bytes,
             peak_above_baseline_bytes=peak_bytes - baseline_bytes)
    if case["mode"] == "infer":
        m["peak_phase"] = "forward"
        m["phase_peaks"] = dict(forward=first["peak"])
        m["steps"] = None
    else:
        steps = []
        s = 1
        while True:
            try:
                ps = {k: rp.phase(f"step{s}:{k}") for k in PHASE_KEYS}
            except KeyError:
                break
            pk = max(PHASE_KEYS, key=lambda k: (ps[k]["peak"], -PHASE_KEYS.index(k)))
            step_base = ps["forward"]["start"]
            steps.append(dict(step=s, baseline_bytes=step_base, peak_bytes=ps[pk]["peak"],
                              peak_above_baseline_bytes=ps[pk]["peak"] - step_base,
                              peak_phase=pk, phase_peaks={k: ps[k]["peak"] for k in PHASE_KEYS},
                              phase_peaks_above_baseline={k: ps[k]["peak"] - step_base for k in PHASE_KEYS},
                              end_bytes=ps["optimizer"]["end"]))
            s += 1
        m["steps"] = steps
        m["peak_phase"] = peak_name.split(":")[1]
        m["peak_step"] = int(peak_name.split(":")[0][4:])
    # who is alive at the peak
    alive = rp.live_at(first["peak_event"])
    top_items, grouped, items = _top_alive(rp, alive, baseline_live)
    m["alive_at_peak"] = top_items
    m["alive_at_peak_by_op"] = grouped
    m["alive_at_peak_totals"] = dict(
        blocks=len(alive), bytes=sum(rp.allocs[a][0] for a in alive),
        baseline_blocks=len([a for a in alive if a in baseline_live]),
        baseline_bytes=sum(rp.allocs[a][0] for a in alive if a in baseline_live),
        above_baseline_blocks=len(items), above_baseline_bytes=sum(nb for nb, _ in items),
        listed=len(top_items), listed_bytes=sum(t["bytes"] for t in top_items))
    m["peak_op"] = op_label(rp.allocs[alive[-1]][1]) if alive else None
    end_event = [i for i, e in enumerate(rp.trace) if e[0] == "mark"][rp.phase("end")["mark_index"]]
    m["trace_stats"] = dict(allocations=rp.n_alloc, frees=rp.n_free,
                            allocator_total_offset=rp.allocator_offset,
                            freed_baseline_blocks=len(baseline_live - set(rp.live_at(end_event))))
    m["crosscheck"] = crosscheck(rec, rp)
    return m


def crosscheck(rec, rp):
    """Compare per-phase peaks with the LD_PRELOAD shim's c10 category."""
    if not rec.shim_at_mark:
        return dict(method="ld_preload_shim", available=False)
    # shim snapshot taken at mark k: cur at mark k, peak over (mark k-1, mark k]
    snaps = rec.shim_at_mark
    base = rp.phase("baseline")
    k0 = base["mark_index"] + 1  # the mark closing the baseline phase
    shim_cur0 = snaps[k0][0]
    prof0 = rp.mark_live[k0]
    # phase peak per shim: max of peaks over the segments inside the phase
    pidx = [(p["name"], p["mark_index"]) for p in rp.phases]
    res = {}
    overall_shim = overall_prof = None
    other = [0] * 4
    for j, (name, mi) in enumerate(pidx):
        if name in ("start", "baseline", "stop", "end"):
            continue
        end_mi = pidx[j + 1][1] if j + 1 < len(pidx) else len(snaps) - 1
        seg_peaks = [snaps[k][1] for k in range(mi + 1, end_mi + 1)]
        sp = [max(s[c] for s in seg_peaks) for c in range(4)]
        shim_peak = prof0 + (sp[0] - shim_cur0[0])
        prof_peak = rp.phase(name)["peak"]
        res[name] = dict(shim_peak_bytes=shim_peak, diff_bytes=shim_peak - prof_peak)
        for c in range(1, 4):
            other[c] = max(other[c], sp[c] - shim_cur0[c])
        if overall_shim is None or shim_peak > overall_shim:
            overall_shim = shim_peak
        if overall_prof is None or prof_peak > overall_prof:
            overall_prof = prof_peak
    return dict(method="ld_preload_shim", available=True,
                peak_bytes=overall_shim, diff_bytes=overall_shim - overall_prof,
                phases=res,
                non_c10_peak_growth_bytes=dict(aligned=other[1], malloc=other[2], mmap=other[3]))
