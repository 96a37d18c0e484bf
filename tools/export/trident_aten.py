"""ATen-level capture of a PyTorch nn.Module for trident (see Note [ATen capture]).

`capture(module, inputs, label, loss, name)` returns trident's graph (a dict,
"trident-graph/1") whose ops run ATen operators by name in trident's C++
executor. It is what `trident_export.py --capture aten` (the default) runs.

Note [ATen capture]
~~~~~~~~~~~~~~~~~~~
How a module becomes a graph:
1. Trace. `make_fx` (torch.fx.experimental.proxy_tensor) runs the module in
   training mode, with its parameters and buffers passed in by name
   (functional_call), on fake tensors of the example's shapes (tracing_mode
   "fake": shapes and dtypes, no data), and records every ATen operator the
   dispatcher runs. Python control flow and shape arithmetic run for real,
   so they are specialised to the example: what the module did then is what
   trident runs. (A real-tensor trace under PyTorch 2.15 keeps every
   parameter alive after it ends, through references gc cannot see: 80
   classifiers exported in one process grew past 24 GB. The values the
   later steps need come from real runs of the traced graph, _values.)
2. Trace again at another batch size. Both traces must have the same
   operators; an integer argument that differs between them (a view's size,
   a zeros' shape) is linear in the batch, and is written as
   {"batch": a, "plus": c}, so the graph runs at any micro-batch size. A
   graph that changes with the batch size is refused.
3. Make it functional. An in-place operator (`relu_`, `add_`,
   `bernoulli_`) becomes its out-of-place form when no other view of the
   tensor it writes is read later; otherwise the export stops naming it.
   A write through slice or select views becomes slice_scatter /
   select_scatter into the base, and later readers read the result.
   BatchNorm is called without running statistics (trident normalises each
   micro-batch by its own, see Note [Batch norm] in nn/graph_module.h),
   _reshape_alias becomes reshape (see Note [Layout-free graphs]), and nodes
   whose result nobody reads are dropped.
4. Group. A node whose result is one tensor with the batch on axis 0, whose
   rows are the samples (run again on the rows rotated, its rows rotate
   alike: _row_aligned), may end a trident op: it can cross a pipeline stage
   boundary and be split across replicas. Every other result (a tuple, a tensor with the batch on another
   axis or folded into another axis, a dtype trident does not send) stays in
   the op of its readers. Nodes that do not depend on the data (parameters
   seen through `t` or `expand`, constants, zeros of the batch's shape) are
   recomputed inside each op that reads them. Each trident op is then a short
   program of ATen calls with one output; the loss is trident's own op.
"""

import base64
import collections
import math
import operator

import torch
import torch.fx

try:
    from torch.func import functional_call as _functional_call  # PyTorch 2.x
except ImportError:  # 1.13
    from torch.nn.utils.stateless import functional_call as _functional_call
from torch.fx.experimental.proxy_tensor import make_fx

CAPTURE = "aten/1"
BATCHES = (2, 3)  # the two batch sizes traced; see step 2 of the Note
SENDABLE = {torch.float32: "float32", torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16"}
MATRIX_OPS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "matmul", "linear"}
RANDOM_OPS = {"bernoulli", "bernoulli_", "native_dropout", "rand_like", "randn_like", "dropout", "uniform_",
              "normal_", "rand", "randn", "randint", "randperm", "exponential_", "multinomial"}


class CaptureError(Exception):
    """The module cannot be captured; the message says which operator and why."""


# ------------------------------------------------------------------ tracing


def _all_parameter_names(module):
    """Every (name, tensor) under which a parameter is reachable, shared ones under each name."""
    out = []

    def walk(m, prefix):
        for k, p in m._parameters.items():
            if p is not None:
                out.append((prefix + k, p))
        for k, child in m._modules.items():
            if child is not None:
                walk(child, prefix + k + ".")
    walk(module, "")
    return out


class _ModulePaths:
    """Records, for each traced node, the path of the innermost submodule whose call made it."""

    def __init__(self, module):
        self.stack = [""]
        self.handles = []
        for path, m in module.named_modules():
            if path:
                self.handles.append(m.register_forward_pre_hook(lambda _m, _i, p=path: self.enter(p)))
                self.handles.append(m.register_forward_hook(lambda _m, _i, _o: self.leave()))
        self.original = torch.fx.Graph.create_node
        paths = self

        def create_node(graph, *args, **kwargs):
            node = paths.original(graph, *args, **kwargs)
            node.meta["module_path"] = paths.stack[-1]
            return node
        torch.fx.Graph.create_node = create_node

    def enter(self, path):  # hooks return None: a forward hook's result would replace the module's output
        self.stack.append(path)

    def leave(self):
        self.stack.pop()

    def close(self):
        torch.fx.Graph.create_node = self.original
        for h in self.handles:
            h.remove()


def _example(inputs, rows, seed):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for shape, dtype in inputs.values():
        if dtype == torch.int64:
            out.append(torch.zeros((rows,) + tuple(shape), dtype=dtype))
        else:
            out.append(torch.randn((rows,) + tuple(shape), generator=gen).to(dtype))
    return out


def _trace(module, inputs, rows):
    state = {}
    for k, p in _all_parameter_names(module):
        state[k] = p
    for k, b in module.named_buffers():
        state[k] = b
    examples = _example(inputs, rows, seed=rows)

    def run(state, xs):
        return _functional_call(module, state, tuple(xs))
    paths = _ModulePaths(module)
    try:
        torch.manual_seed(0)
        gm = make_fx(run, tracing_mode="fake")(state, examples)
    except Exception as e:
        text = str(e).splitlines()[0] if str(e) else ""
        if "data-dependent" in text or "value out of a tracing tensor" in text:
            raise CaptureError("the model does not trace: its Python looks at a tensor's values (data-dependent "
                               "control flow such as `if x.sum() > 0:`), which a capture cannot follow; compute "
                               "both branches and choose with torch.where")
        raise CaptureError("the model does not run on the given inputs (batch %d): %s: %s" % (
            rows, type(e).__name__, text))
    finally:
        paths.close()
    _drop_unused_views(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    flat_state = list(state.items())
    roles = {}
    ids = {}
    for k, p in _all_parameter_names(module):
        ids.setdefault(id(p), k)  # the first name of a shared parameter is its name
    buffer_names = {k for k, _ in module.named_buffers()}
    for node, (k, t) in zip(placeholders, flat_state):
        roles[node] = ("buffer", k, t) if k in buffer_names else ("param", ids[id(t)], t)
    for node, field in zip(placeholders[len(flat_state):], inputs):
        roles[node] = ("input", field, None)
    return gm, roles, (state, examples)


def _drop_unused_views(gm):
    """Removes views that nothing reads. A fake-tensor trace records some (torch.flatten under 2.15 takes a second
    view of its input and drops it); left in, such a view would read its base after a later in-place write and
    be refused as aliasing. Only views go: an unused operator that writes or draws still runs."""
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and not node.users and _is_view(node):
            gm.graph.erase_node(node)
    gm.recompile()


def _not_random(n, args):
    """What random operator `n` gives with every draw fixed: the input unchanged (masks of ones)."""
    name = _op_name(n)
    first = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if name in ("native_dropout",):
        return first.clone(), torch.ones_like(first, dtype=torch.bool)
    if name in ("dropout",):
        return first.clone()
    if first is not None:
        return torch.ones_like(first)
    return None


def _values(gm, args, draws=True):
    """Every node's value in a real run (for shapes and costs; random operators draw anew, shapes do not care).
    draws=False: random operators give their input or ones (_not_random), so two runs differ only by what the
    inputs make them."""
    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            v = None
            if not draws and n.op == "call_function" and _op_name(n) in RANDOM_OPS:
                v = _not_random(n, self.fetch_args_kwargs_from_env(n)[0])
            if v is None:
                v = super().run_node(n)
            values[n] = v
            return v
    with torch.no_grad():
        torch.manual_seed(0)
        Recorder(gm).run(*args)
    return values


# ------------------------------------------------------ functional and clean


def _schema(node):
    return node.target._schema if isinstance(node.target, torch._ops.OpOverload) else None


def _op_name(node):
    s = _schema(node)
    return s.name.split("::")[-1] if s is not None else getattr(node.target, "__name__", str(node.target))


def _is_view(node):
    s = _schema(node)
    if s is None:  # an element of a tuple aliases the tuple's input when the tuple's operator returns views
        return node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node) and _is_view(node.args[0])
    returns = str(s).split("->", 1)[1]
    return "(a" in returns and "!" not in returns


def _reached(starts, neighbours):
    """Every node reached from `starts` (not counting them) by repeatedly following `neighbours(node)`."""
    reached, frontier = set(), list(starts)
    while frontier:
        for m in neighbours(frontier.pop()):
            if m not in reached:
                reached.add(m)
                frontier.append(m)
    return reached


def _alias_class(node):
    """The nodes that share `node`'s memory through view edges, either way."""
    def views(n):
        near = [u for u in n.users if _is_view(u) and u.args and u.args[0] is n]
        if _is_view(n) and n.args and isinstance(n.args[0], torch.fx.Node):
            near.append(n.args[0])
        return near
    return {node} | _reached([node], views)


def _writes(node):
    s = _schema(node)
    return s is not None and bool(s.arguments) and s.arguments[0].alias_info is not None and \
        s.arguments[0].alias_info.is_write


def _functional_of(node):
    """The out-of-place overload of an in-place one: add_.Tensor -> add.Tensor, bernoulli_.float -> bernoulli.p."""
    base = _op_name(node)[:-1] if _op_name(node).endswith("_") else None
    if base is None:
        return None
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    def signature(op):
        return [(a.name, str(a.type)) for a in op._schema.arguments]
    wanted = signature(node.target)
    for overload in packet.overloads():
        cand = getattr(packet, overload)
        if signature(cand) == wanted:
            return cand
    return None


def _describe(node):
    where = node.meta.get("module_path") or "the top-level module"
    return "ATen operator %s (node '%s', in %s)" % (node.target, node.name, where)


_SCATTERS = {"slice": torch.ops.aten.slice_scatter.default, "select": torch.ops.aten.select_scatter.default}


def _view_chain(target):
    """(root, [views from the root down to target]) when target is the root itself or reached from it by
    slice and select views only; (target, None) otherwise."""
    chain, n = [], target
    while _is_view(n):
        if _op_name(n) not in _SCATTERS:
            return target, None
        chain.append(n)
        n = n.args[0]
    return n, list(reversed(chain))


def _fill_defaults(node):
    """Writes out the positional arguments an in-place call left to their defaults: the out-of-place overload
    may have none (bernoulli_.float defaults p, bernoulli.p does not)."""
    args = list(node.args)
    for a in node.target._schema.arguments[len(args):]:
        if a.kwarg_only or a.name in node.kwargs or not a.has_default_value():
            break
        args.append(a.default_value)
    node.args = tuple(args)


def _write_through_views(g, node, functional, root, chain, order):
    """An in-place write into `root` through slice/select views, made functional: the written view is computed
    out of place, each level is scattered back into its parent (slice_scatter, select_scatter), and every later
    reader of the root or of a view on the way reads the new value — what eager would have read."""
    later = {m: [u for u in m.users if order[u] > order[node]] for m in [root] + chain}
    with g.inserting_after(node):
        current = g.call_function(functional, node.args, node.kwargs)
    new = {(chain[-1] if chain else root): current}
    for view in reversed(chain):
        parent = view.args[0]
        with g.inserting_after(current):
            current = g.call_function(_SCATTERS[_op_name(view)], (parent, current) + tuple(view.args[1:]))
        current.meta["module_path"] = node.meta.get("module_path", "")
        new[parent] = current
    for m, users in later.items():
        for u in users:
            u.replace_input_with(m, new[m])
    node.replace_all_uses_with(new[chain[-1] if chain else root])
    g.erase_node(node)


def _make_functional(gm):
    """Step 3 of Note [ATen capture]; raises CaptureError for a write that other views would see."""
    g = gm.graph
    order = {n: i for i, n in enumerate(g.nodes)}
    for node in list(g.nodes):
        if node.op != "call_function":
            continue
        name = _op_name(node)
        if name in ("native_batch_norm", "_native_batch_norm_legit_functional", "_native_batch_norm_legit"):
            args = list(node.args)
            args[3] = None
            args[4] = None
            if name != "native_batch_norm":
                node.target = torch.ops.aten.native_batch_norm.default
            node.args = tuple(args)
            continue
        if not _writes(node):
            continue
        target = node.args[0]
        if target.op == "placeholder" and node.users:
            raise CaptureError("%s writes the module's input or parameter '%s' in place" % (_describe(node),
                                                                                          target.name))
        functional = _functional_of(node)
        if functional is None:
            raise CaptureError("%s writes in place and has no out-of-place form" % _describe(node))
        _fill_defaults(node)
        alias = _alias_class(target)
        if not [u for a in alias for u in a.users if u is not node and order[u] > order[node]]:
            node.target = functional  # the usual case: nothing reads the written memory afterwards
            continue
        root, chain = _view_chain(target)
        mine = {root} | set(chain or [])
        later = [u for a in alias if a not in mine and order[a] < order[node]
                 for u in a.users if u is not node and order[u] > order[node]]
        if later or chain is None:
            raise CaptureError("%s writes a tensor that %s reads later through another view; trident needs "
                               "out-of-place code there (e.g. `x = x + y` instead of `x += y`)" % (
                                   _describe(node), (later[0] if later else target).name))
        _write_through_views(g, node, functional, root, chain, order)
        order = {n: i for i, n in enumerate(g.nodes)}
    # Note [Layout-free graphs]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~
    # _reshape_alias(x, size, stride) reads x by the strides x had when traced; a
    # tensor that crossed a stage boundary arrives contiguous, and the recorded strides would read the wrong
    # elements. reshape(x, size) means the same for the traced layout and is right for any other.
    for node in g.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._reshape_alias.default:
            node.target = torch.ops.aten.reshape.default
            node.args = (node.args[0], node.args[1])
    # Note [Copies with gradients]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # An in-place copy (`x[:, 2:] = y` is copy_ into a slice) becomes aten::copy(dst, src) above. PyTorch 2.x's
    # autograd has no formula for the out-of-place copy (its backward raises at the first step); what it
    # computes is src cast to dst's dtype and broadcast to dst's shape, which type_as and expand_as compute
    # with gradients in every version (the gradient reaches src, summed over the broadcast; none reaches dst,
    # as with copy).
    for node in list(g.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.copy.default:
            dst, src = node.args[0], node.args[1]
            with g.inserting_before(node):
                cast = g.call_function(torch.ops.aten.type_as.default, (src, dst))
                spread = g.call_function(torch.ops.aten.expand_as.default, (cast, dst))
            for made in (cast, spread):
                made.meta["module_path"] = node.meta.get("module_path", "")
            node.replace_all_uses_with(spread)
            g.erase_node(node)
    # Drop what nobody reads (autograd's detach, BatchNorm's running-stat updates, empty reserves).
    changed = True
    while changed:
        changed = False
        for node in reversed(list(g.nodes)):
            if node.op in ("call_function", "get_attr") and not node.users:
                g.erase_node(node)
                changed = True
    g.lint()


# ------------------------------------------------------------------ encoding


def _dtype_name(d):
    return str(d).replace("torch.", "")


def _encode_constant(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, torch.dtype):
        return {"dtype": _dtype_name(v)}
    if isinstance(v, torch.device):
        return {"device": v.type}
    if isinstance(v, torch.layout):
        return {"layout": str(v).replace("torch.", "")}
    if isinstance(v, torch.memory_format):
        return {"memory_format": str(v).replace("torch.", "")}
    raise CaptureError("an argument of type %s cannot be written" % type(v).__name__)


class _Batched:
    """Per-node facts from the two traces: whether it depends on the data, and the batch layout of its result."""

    def __init__(self, gm1, values1, values2, nodes2, roles, aligned2):
        self.depends = {}
        self.cuttable = {}
        for n in gm1.graph.nodes:
            if n.op == "placeholder":
                self.depends[n] = roles[n][0] == "input"
            else:
                self.depends[n] = any(self.depends.get(a, False) for a in n.all_input_nodes)
            v1, v2 = values1.get(n), values2.get(nodes2[n])
            self.cuttable[n] = (
                self.depends[n] and isinstance(v1, torch.Tensor) and v1.dim() >= 1 and v1.dtype in SENDABLE
                and v1.shape[0] == BATCHES[0] and v2.shape[0] == BATCHES[1] and list(v1.shape[1:]) == list(v2.shape[1:])
                and nodes2[n] in aligned2)


ROTATION = (2, 0, 1)  # the rows of the batch of 3, rotated: see _row_aligned


def _row_aligned(gm, args):
    """The nodes whose rows are the samples' (step 4 of Note [ATen capture]): run again on the batch's rows
    rotated, each such result's rows rotate alike. A tensor whose first axis has the batch's length but mixes
    samples across rows (a permute and reshape that moves another axis to the front) does not, and must not be
    cut or split by rows. BatchNorm's statistics do not care about the rows' order; random operators draw nothing
    in either run."""
    rot = torch.tensor(ROTATION)
    # In float64, so that rounding amplified through many BatchNorms of 3 rows stays far below the check.
    def wide(t):
        return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
    state, examples = args
    try:
        state, examples = {k: wide(v) for k, v in state.items()}, [wide(x) for x in examples]
        values = _values(gm, (state, examples), draws=False)
    except RuntimeError:  # an operator without float64 kernels: compare in float32 instead
        state, examples = args
        values = _values(gm, (state, examples), draws=False)
    rotated = _values(gm, (state, [x[rot] for x in examples]), draws=False)
    aligned = set()
    for n, v in values.items():
        w = rotated.get(n)
        if not isinstance(v, torch.Tensor) or v.dim() == 0 or v.shape[0] != len(ROTATION) or \
                not isinstance(w, torch.Tensor) or w.shape != v.shape:
            continue
        want = v[rot]
        if v.is_floating_point():
            ok = (w - want).abs().max().item() <= 1e-5 * (want.abs().max().item() + 1e-6)
        else:
            ok = torch.equal(w, want)
        if ok:
            aligned.add(n)
    return aligned


def _linear_int(a1, a2, node):
    step = BATCHES[1] - BATCHES[0]
    if (a2 - a1) % step:
        raise CaptureError("%s takes %d at batch %d and %d at batch %d, which is not linear in the batch size" % (
            _describe(node), a1, BATCHES[0], a2, BATCHES[1]))
    a = (a2 - a1) // step
    return {"batch": a, "plus": a1 - a * BATCHES[0]}


def _changed(node, why):
    raise CaptureError("the traced graph changes with the batch size at %s: %s; trident runs one graph for every "
                       "micro-batch size" % (_describe(node), why))


# ------------------------------------------------------------------ grouping


class _Groups:
    """Union-find over the data-dependent nodes (step 4 of Note [ATen capture])."""

    def __init__(self, nodes):
        self.parent = {n: n for n in nodes}

    def find(self, n):
        while self.parent[n] is not n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra
            return True
        return False


def _group(nodes, batched, output_node, order):
    """Groups of nodes, each with one result that leaves it; returns {root: [nodes in order]}."""
    groups = _Groups(nodes)
    for n in nodes:
        if not batched.cuttable[n]:
            for u in n.users:
                if u in groups.parent:
                    groups.union(n, u)
    while True:
        members = collections.defaultdict(list)
        for n in nodes:
            members[groups.find(n)].append(n)
        changed = False
        # Convex: a node on a path from a group back into it joins it (only groups of several can be concave).
        multi = {r for r, ms in members.items() if len(ms) > 1}
        down, up = {}, {}
        for n in reversed(nodes):
            down[n] = ({groups.find(n)} & multi).union(*[down[u] for u in n.users if u in down])
        for n in nodes:
            up[n] = ({groups.find(n)} & multi).union(*[up[a] for a in n.all_input_nodes if a in up])
        for n in nodes:
            for r in down[n] & up[n]:
                if groups.find(n) is not groups.find(r):
                    changed |= groups.union(r, n)
        if changed:
            continue
        # One result leaves each group; more than one: the readers join.
        for root, ms in members.items():
            leaving = [n for n in ms if any(u not in groups.parent or groups.find(u) is not root for u in n.users)]
            if len(leaving) > 1:
                for n in leaving:
                    for u in n.users:
                        if u in groups.parent and u is not output_node:
                            changed |= groups.union(root, u)
                if not changed:
                    raise CaptureError("%s and %s both leave one group of operators; trident's ops have one "
                                       "result" % (_describe(leaving[0]), _describe(leaving[1])))
        if not changed:
            return {r: sorted(ms, key=order.get) for r, ms in members.items()}


# ------------------------------------------------------------------ the graph


def _numel(v):
    if isinstance(v, torch.Tensor):
        return v.numel()
    if isinstance(v, (tuple, list)):
        return sum(_numel(x) for x in v)
    return 0


def _nbytes(v):
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def _flops(node, values):
    """Forward FLOPs of one call: multiply-adds of the matrix and convolution operators, one per output element
    for the rest (which move memory more than they compute)."""
    name = _op_name(node)
    out = values.get(node)
    args = [values.get(a) if isinstance(a, torch.fx.Node) else a for a in node.args]
    if name in ("mm", "bmm", "addmm", "baddbmm") and isinstance(out, torch.Tensor):
        a = args[1] if name in ("addmm", "baddbmm") else args[0]
        return 2.0 * out.numel() * a.shape[-1] + (out.numel() if name.startswith("add") else 0)
    if name in ("convolution", "_convolution") and isinstance(out, torch.Tensor):
        w = args[1]
        transposed = bool(args[6]) if len(args) > 6 else False
        per_out = w.shape[1] * math.prod(w.shape[2:])
        return 2.0 * (args[0].numel() if transposed else out.numel()) * per_out
    return float(_numel(out))


def _is_matrix(node):
    return _op_name(node) in MATRIX_OPS


class _Writer:
    """Turns the grouped trace into trident ops (step 4 of Note [ATen capture])."""

    def __init__(self, g, trace1, trace2, batched):
        self.g = g
        self.gm1, self.values1, self.roles = trace1
        self.gm2, self.values2, _ = trace2
        self.nodes2 = dict(zip(self.gm1.graph.nodes, self.gm2.graph.nodes))
        self.batched = batched
        self.op_of = {}  # node -> trident op name, for nodes that end an op
        self.constants = {}

    def free_ancestors(self, nodes):
        return _reached(nodes, lambda n: [a for a in n.all_input_nodes if not self.batched.depends[a]])

    def write_group(self, members, order):
        result = [n for n in members if any(u not in set(members) for u in n.users)]
        if len(result) != 1:
            raise CaptureError("internal: a group has %d results" % len(result))
        result = result[0]
        free = sorted(self.free_ancestors(members), key=order.get)
        program = _Program(self)
        for n in free + members:
            program.add(n)
        inputs = program.inputs
        v1, v2 = self.values1[result], self.values2[self.nodes2[result]]
        fwd1 = sum(_flops(n, self.values1) for n in free + members)
        fwd2 = sum(_flops(n, self.values2) for n in [self.nodes2[m] for m in free + members])
        step = BATCHES[1] - BATCHES[0]
        fwd = max(0.0, (fwd2 - fwd1) / step)
        matrix = any(_is_matrix(n) for n in members)
        act1 = sum(_nbytes(self.values1[n]) for n in members if not _is_view(n))
        act2 = sum(_nbytes(self.values2[self.nodes2[n]]) for n in members if not _is_view(n))
        moved1 = sum(_nbytes(self.values1[n]) for n in members) + sum(_nbytes(self.values1[a]) for a in inputs)
        moved2 = sum(_nbytes(self.values2[self.nodes2[n]]) for n in members) + \
            sum(_nbytes(self.values2[self.nodes2[a]]) for a in inputs)
        attrs = {"capture": CAPTURE, "calls": program.calls, "result": program.ref(result),
                 "module": result.meta.get("module_path", ""),
                 "bytes": int(max(0, moved2 - moved1) // step)}
        name = result.name
        if name in self.g.specs:
            name = "aten_" + name
        self.op_of[result] = self.g.add(
            name, "aten", [self.op_of[a] for a in inputs], list(v1.shape[1:]), SENDABLE[v1.dtype], attrs=attrs,
            params=program.params, fwd=fwd, bwd=(2 if matrix else 1) * fwd, act=int(max(0, act2 - act1) // step))
        assert list(v2.shape[1:]) == list(v1.shape[1:])


class _Program:
    """One trident op's calls; see "calls" in docs/own-model.md."""

    def __init__(self, writer):
        self.w = writer
        self.calls = []
        self.index = {}  # node -> call index
        self.inputs = []  # nodes read from other ops
        self.params = []
        self.values = {}  # node -> encoded reference

    def ref(self, node):
        return self.values[node]

    def add(self, node):
        w = self.w
        if node.op == "placeholder":
            role, name, tensor = w.roles[node]
            if role == "param":
                if tensor.dtype != torch.float32:
                    raise CaptureError("parameter '%s' is %s; trident trains float32 parameters" % (name, tensor.dtype))
                if name not in [p[0] for p in self.params]:
                    self.params.append((name, list(tensor.shape)))
                self.values[node] = {"param": name}
            elif role == "buffer":
                w.constants[name] = tensor
                self.values[node] = {"const": name}
            else:
                raise CaptureError("internal: input %s inside a program" % name)
            return
        if node.op == "get_attr":
            name = "_constant." + node.target
            w.constants[name] = getattr(w.gm1, node.target)
            self.values[node] = {"const": name}
            return
        if node.target is operator.getitem:
            src, k = node.args
            self.values[node] = dict(self.resolve(src, node), item=int(k))
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise CaptureError("%s is not an ATen operator" % _describe(node))
        node2 = w.nodes2[node]
        args = [self.encode(a, b, node) for a, b in zip(node.args, node2.args)]
        kwargs = {k: self.encode(v, node2.kwargs.get(k), node) for k, v in node.kwargs.items()}
        schema = node.target._schema
        call = {"op": schema.name, "overload": schema.overload_name, "args": args}
        if kwargs:
            call["kwargs"] = kwargs
        if _op_name(node) in RANDOM_OPS:
            call["random"] = True
        self.index[node] = len(self.calls)
        self.calls.append(call)
        self.values[node] = {"call": self.index[node]}

    def resolve(self, a, user):
        if a in self.values:
            return self.values[a]
        if a in self.w.op_of:  # the result of another op, or a data input
            if a not in self.inputs:
                self.inputs.append(a)
            return {"in": self.inputs.index(a)}
        if self.w.roles.get(a, ("",))[0] == "input":
            if a not in self.inputs:
                self.inputs.append(a)
            return {"in": self.inputs.index(a)}
        raise CaptureError("internal: %s reads %s before it is made" % (_describe(user), a.name))

    def encode(self, a, b, node):
        if isinstance(a, torch.fx.Node):
            return self.resolve(a, node)
        if isinstance(a, (list, tuple)):
            if not isinstance(b, (list, tuple)) or len(a) != len(b):
                _changed(node, "a list argument has another length")
            return [self.encode(x, y, node) for x, y in zip(a, b)]
        if isinstance(a, bool) or not isinstance(a, int):
            if a != b and not (isinstance(a, float) and math.isnan(a)):
                _changed(node, "argument %r became %r" % (a, b))
            return _encode_constant(a)
        if a == b:
            return a
        if not isinstance(b, int):
            _changed(node, "argument %r became %r" % (a, b))
        return _linear_int(a, b, node)


def _tensor_json(t):
    t = t.detach().contiguous().cpu()
    if t.dtype not in (torch.float32, torch.int64, torch.bool, torch.float64, torch.int32):
        raise CaptureError("a constant of dtype %s cannot be written" % t.dtype)
    return {"dtype": _dtype_name(t.dtype), "shape": list(t.shape),
            "base64": base64.b64encode(t.numpy().tobytes()).decode("ascii")}


def capture(module, inputs, g, input_ops):
    """Adds the module's ATen ops to `g` (trident_export's _Graph), reading the data from `input_ops`
    ({forward argument: op name}); returns (output op name, constants as JSON, the capture's record)."""
    module.train()
    traces = []
    for rows in BATCHES:
        gm, roles, args = _trace(module, inputs, rows)
        _make_functional(gm)
        gm.recompile()
        traces.append((gm, _values(gm, args), roles))
    trace1, trace2 = traces
    assert BATCHES[1] == len(ROTATION)
    aligned2 = _row_aligned(trace2[0], args)
    gm1, gm2 = trace1[0], trace2[0]
    n1, n2 = list(gm1.graph.nodes), list(gm2.graph.nodes)
    if len(n1) != len(n2) or any(a.target != b.target for a, b in zip(n1, n2)):
        first = next((a for a, b in zip(n1, n2) if a.target != b.target), n1[min(len(n1), len(n2)) - 1])
        _changed(first, "the two traces run different operators (the model's Python looks at the batch size)")
    nodes2 = dict(zip(n1, n2))
    batched = _Batched(gm1, trace1[1], trace2[1], nodes2, trace1[2], aligned2)
    out_node = next(n for n in n1 if n.op == "output")
    result = out_node.args[0]
    if isinstance(result, (tuple, list)):
        if len(result) != 1:
            raise CaptureError("the module returns %d values; trident trains one output (the logits, or the "
                               "prediction for mse): return one tensor" % len(result))
        result = result[0]
    if not isinstance(result, torch.fx.Node) or not batched.cuttable.get(result):
        raise CaptureError("the module must return one tensor with the batch on its first axis")
    order = {n: i for i, n in enumerate(n1)}
    data = [n for n in n1 if n.op == "call_function" and batched.depends[n]]
    groups = _group(data, batched, out_node, order)
    writer = _Writer(g, trace1, trace2, batched)
    for n in n1:
        if n.op == "placeholder" and trace1[2][n][0] == "input":
            writer.op_of[n] = input_ops[trace1[2][n][1]]
    for members in sorted(groups.values(), key=lambda ms: order[ms[-1]]):
        writer.write_group(members, order)
    # An int64 input that indexes an embedding reads rows below the table's size: its "range", for
    # trident's synthetic data.
    for n in n1:
        if _op_name(n) in ("embedding", "_embedding_bag", "embedding_bag") and n.op == "call_function":
            index = n.args[1]
            while isinstance(index, torch.fx.Node) and _is_view(index):
                index = index.args[0]
            role = trace1[2].get(index)
            if role and role[0] == "input":
                op = next(o for o in g.ops if o["name"] == input_ops[role[1]])
                rows = int(trace1[1][n.args[0]].shape[0])
                op["attrs"]["range"] = min(rows, op["attrs"].get("range", rows))
    constants = {k: _tensor_json(v) for k, v in writer.constants.items()}
    record = {"by": "make_fx", "format": CAPTURE, "torch": torch.__version__.split("+")[0]}
    return writer.op_of[result], constants, record
