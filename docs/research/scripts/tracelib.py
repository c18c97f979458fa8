"""tracelib: exact c10 CPU allocator trace of a Python callable (PyTorch 1.13, CPU).

Uses torch.profiler with profile_memory=True and walks
prof.profiler.kineto_results.experimental_event_tree(): every '[memory]' node
carries alloc_size (+alloc / -free, exact bytes), ptr, total_allocated and a ns
timestamp; its ancestors give the op / autograd node that did it.

Events are sorted by start_time_ns and the order is verified with the running
total_allocated counter (total_i == total_{i-1} + size_i); a violation is reported.

Labelling: inside the traced callable call `mark(name, tensor)`; that emits a
record_function event '@L|name|storage_ptr|nbytes' whose timestamp is used to
find the allocation that is live for that ptr at that moment.  Frees of memory
allocated before the trace are labelled by marks too (marks may refer to
pre-existing tensors).  `phase(name)` is a context manager that tags events.

Run every script with /usr/bin/python3 (Debian's torch 1.13).
"""
import torch, sys, os, contextlib
from torch.profiler import profile, ProfilerActivity, record_function

DT = {torch.float32: 4, torch.int64: 8, torch.bool: 1, torch.uint8: 1, torch.float64: 8, torch.int32: 4}


def _sptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, 'untyped_storage') else t.storage().data_ptr()


def _snbytes(t):
    try:
        return t.untyped_storage().nbytes()
    except Exception:
        return t.storage().nbytes()


def mark(name, t):
    """label the storage of tensor t (or each tensor of a list) as `name`"""
    if t is None:
        return
    if isinstance(t, (list, tuple)):
        for i, x in enumerate(t):
            mark(f"{name}[{i}]", x)
        return
    _rf(f"@L|{name}|{_sptr(t)}|{_snbytes(t)}")


def _rf(name):
    # record_function() would allocate a 4-byte handle tensor and a 288-byte RecordFunction
    # tensor through c10; the *_new ScriptObject variant allocates nothing through c10.
    h = torch.ops.profiler._record_function_enter_new(name, None)
    torch.ops.profiler._record_function_exit._RecordFunction(h)


@contextlib.contextmanager
def phase(name):
    h = torch.ops.profiler._record_function_enter_new(f"PHASE:{name}", None)
    try:
        yield
    finally:
        torch.ops.profiler._record_function_exit._RecordFunction(h)


def saved_of(node):
    """saved tensors of an autograd node: list of (attr, tensor)"""
    out = []
    for a in dir(node):
        if a.startswith('_saved_'):
            try:
                v = getattr(node, a)
            except Exception as ex:  # released
                v = None
            if isinstance(v, torch.Tensor):
                out.append((a, v))
            elif isinstance(v, (list, tuple)) and v and all(isinstance(x, torch.Tensor) for x in v):
                for i, x in enumerate(v):
                    out.append((f"{a}[{i}]", x))
    return out


def walk_graph(root_fn):
    """graph nodes in DFS order (unique)"""
    seen, order, stack = set(), [], [root_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        for nf, _ in n.next_functions:
            stack.append(nf)
    return order


def describe_graph(out, known=None, file=None):
    """print each autograd node of out's graph and its saved tensors.
    known: dict name->tensor to identify saved storages."""
    file = file or sys.stdout
    known = known or {}
    kp = {}
    for k, v in known.items():
        if isinstance(v, torch.Tensor):
            kp.setdefault(_sptr(v), k)
    gf = out.grad_fn if isinstance(out, torch.Tensor) else out
    for n in walk_graph(gf):
        sv = saved_of(n)
        desc = []
        for a, t in sv:
            if a.endswith('sym_sizes'):
                continue
            who = kp.get(_sptr(t), '?')
            desc.append(f"{a}={tuple(t.shape)}:{str(t.dtype)[6:]}:{_snbytes(t)}B<{who}>")
        print(f"  node {n.name()}: " + (', '.join(desc) if desc else '(no saved tensors)'), file=file)


def mark_graph(out, prefix='saved'):
    """mark all saved tensors of the graph of out"""
    gf = out.grad_fn if isinstance(out, torch.Tensor) else out
    for n in walk_graph(gf):
        for a, t in saved_of(n):
            mark(f"{prefix}:{n.name()}.{a[7:]}", t)


class Trace:
    def __init__(self, events, marks, warnings):
        self.events, self.marks, self.warnings = events, marks, warnings

    def table(self, file=None, show_scope=True, min_bytes=0, cands=None):
        """cands: dict name->bytes used to annotate unlabelled buffers (=name)"""
        file = file or sys.stdout
        inv = {}
        for k, v in (cands or {}).items():
            inv.setdefault(v, k)
        for w in self.warnings:
            print('  WARNING', w, file=file)
        live = 0
        peak = 0
        for i, e in enumerate(self.events):
            live += e['size']
            peak = max(peak, live)
            if abs(e['size']) < min_bytes:
                continue
            sign = '+' if e['size'] > 0 else '-'
            scope = ' > '.join(p for p in e['path'] if not p.startswith('PHASE:')) if show_scope else ''
            lab = e['label']
            if '(unlabelled)' in lab and abs(e['size']) in inv:
                lab = lab.replace('(unlabelled)', '=' + inv[abs(e['size'])])
            print(f"  {i:3d} {e['phase']:<6} {sign}{abs(e['size']):>10}  live={live:>10}  {lab:<34} {scope}", file=file)
        print(f"  net={live}  peak_over_start={peak}", file=file)

    def net(self):
        return sum(e['size'] for e in self.events)

    def peak(self):
        live = peak = 0
        for e in self.events:
            live += e['size']
            peak = max(peak, live)
        return peak


def trace(fn, warmup=1, threads=None):
    """run fn() `warmup` times, then once under the profiler; returns (Trace, fn result)"""
    if threads is not None:
        torch.set_num_threads(threads)
    for _ in range(warmup):
        fn()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        res = fn()
    tree = prof.profiler.kineto_results.experimental_event_tree()
    mems, marks = [], []

    def walk(e, path):
        if e.name == '[memory]':
            ef = e.extra_fields
            if ef.device.type != 'cpu':
                return
            mems.append(dict(t=e.start_time_ns, size=ef.alloc_size, ptr=ef.ptr, total=ef.total_allocated,
                             path=list(path), tid=e.start_tid))
        elif e.name.startswith('@L|'):
            _, name, p, nb = e.name.split('|')
            marks.append((e.start_time_ns, name, int(p), int(nb)))
        else:
            for c in e.children:
                walk(c, path + [e.name])
    for r in tree:
        walk(r, [])
    mems.sort(key=lambda m: m['t'])
    warnings = []
    # verify order with the running counter, fix ties
    for i in range(1, len(mems)):
        if mems[i]['total'] != mems[i - 1]['total'] + mems[i]['size']:
            warnings.append(f"order check failed at {i}: {mems[i-1]['total']} + {mems[i]['size']} != {mems[i]['total']}")
    # pair alloc/free by ptr
    liveptr = {}
    for i, m in enumerate(mems):
        m['phase'] = next((p[6:] for p in reversed(m['path']) if p.startswith('PHASE:')), '-')
        if m['size'] > 0:
            liveptr[m['ptr']] = i
            m['free_at'] = None
        else:
            j = liveptr.pop(m['ptr'], None)
            m['alloc_at'] = j
            if j is not None:
                mems[j]['free_at'] = i
    # labels from marks
    marks.sort()
    labels = {}
    pre_labels = {}
    for (t, name, p, nb) in marks:
        # alloc event index live at time t with this ptr
        cand = None
        for i, m in enumerate(mems):
            if m['t'] > t:
                break
            if m['size'] > 0 and m['ptr'] == p:
                fa = m.get('free_at')
                if fa is None or mems[fa]['t'] > t:
                    cand = i
        if cand is not None:
            labels.setdefault(cand, []).append(name) if name not in labels.get(cand, []) else None
        else:
            pre_labels.setdefault(p, []).append(name) if name not in pre_labels.get(p, []) else None
    for i, m in enumerate(mems):
        if m['size'] > 0:
            m['label'] = '/'.join(labels.get(i, [])) or '(unlabelled)'
        else:
            j = m.get('alloc_at')
            if j is not None:
                m['label'] = 'free #%d %s' % (j, mems[j]['label'])
            else:
                m['label'] = 'free(pre) ' + ('/'.join(pre_labels.get(m['ptr'], [])) or '?')
        m['label'] = m['label'][:60]
    return Trace(mems, marks, warnings), res


def header(title, file=None):
    print('\n### ' + title, file=file or sys.stdout)


def op_case(title, op, inputs, params=(), grad_out=True, train=True, warmup=1, threads=None,
            show_graph=True, file=None, extra_marks=None, min_bytes=0, backward=True, cands=None, short_scope=True):
    """Trace one op: forward (phase fwd), backward with a pre-allocated grad (phase bwd).
    inputs: list of tensors (pre-existing; requires_grad as given); params: list of (name, Parameter)
    op(*inputs) -> Tensor (or tuple, first used)."""
    file = file or sys.stdout
    header(title, file)
    state = {}

    def setup():
        for _, p in params:
            p.grad = None
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.grad is not None:
                x.grad = None

    def fn():
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                mark(f"in{i}", x)
        for n, p in params:
            mark(n, p)
        ctx = torch.enable_grad() if train else torch.no_grad()
        with ctx:
            with phase('fwd'):
                out = op(*inputs)
        o = out[0] if isinstance(out, (tuple, list)) else out
        mark('out', o)
        if isinstance(out, (tuple, list)):
            for k, oo in enumerate(out[1:]):
                if isinstance(oo, torch.Tensor):
                    mark(f'out{k+1}', oo)
        if extra_marks:
            extra_marks(out)
        if train and o.grad_fn is not None and backward:
            mark_graph(o)
            if 'go' not in state or state['go'].shape != o.shape:
                state['go'] = torch.ones_like(o)
            mark('gout', state['go'])
            if show_graph and 'g' not in state:
                state['g'] = 1
                print('  autograd graph / saved tensors:', file=file)
                known = {f'in{i}': x for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
                known.update({n: p for n, p in params})
                known['out'] = o
                if isinstance(out, (tuple, list)):
                    for k, oo in enumerate(out[1:]):
                        if isinstance(oo, torch.Tensor):
                            known[f'out{k+1}'] = oo
                describe_graph(o, known, file)
            with phase('bwd'):
                o.backward(state['go'])
            for i, x in enumerate(inputs):
                if isinstance(x, torch.Tensor) and x.grad is not None:
                    mark(f'in{i}.grad', x.grad)
            for n, p in params:
                if p.grad is not None:
                    mark(f'{n}.grad', p.grad)
        with phase('del'):
            del out, o
        return None

    if threads is not None:
        torch.set_num_threads(threads)
    for _ in range(warmup):
        setup(); fn()
    setup()
    tr, _ = trace(fn, warmup=0)
    if short_scope:
        for e in tr.events:
            e['path'] = [p.replace('autograd::engine::evaluate_function: ', 'eval:') for p in e['path']]
            e['path'] = [p for p in e['path'] if not p.startswith('aten::conv2d') and p not in ('aten::convolution', 'aten::_convolution')] 
    tr.table(file, min_bytes=min_bytes, cands=cands)
    return tr
