#!/usr/bin/env python3
"""Export a PyTorch nn.Module to trident: model.json (trident's OpGraph,
"trident-graph/1") and init.pt (the module's initial weights, a torch.save
dict of parameter name to tensor, read by trident's `model.weights`).

Command line:
  python3 tools/export/trident_export.py FILE.py:NAME --input image:1,28,28:float32 \\
      --label label --loss cross_entropy --out DIR [--args '[...]' | --args '{...}']

NAME is a class or function in FILE.py; it is called with --args (a JSON list
of positional or an object of keyword arguments) to build the module.
--input gives, in the order of the module's forward arguments, each input's
name, shape per sample (empty for a scalar) and dtype (float32 | int64).
--label names the target input, which the loss compares with the module's
output (cross_entropy: an int64 class index per sample for an output [C], or
one per position for an output [..., T, C], -100 where a position counts for
nothing, as a language model's; mse: float targets of the output's shape).

From Python:
  from trident_export import export
  export(module, inputs={"image": ((1, 28, 28), torch.float32)}, label="label",
         loss="cross_entropy", out_dir="exported")

The module is traced with torch.fx. Each traced node becomes one trident op
of a kind trident's executor runs; a node of any other kind stops the export
with an ExportError naming the node, its target and, when the tracer recorded
it, the line of Python it came from. Never a silently different graph.
Works with python3-torch 1.13 and PyTorch 2.x; no other dependency.
"""

import argparse
import importlib.util
import inspect
import json
import math
import operator
import os
import sys
import tempfile

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

FORMAT = "trident-graph/1"
LOSSES = ("cross_entropy", "mse")
DTYPES = {"float32": torch.float32, "int64": torch.int64}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class ExportError(Exception):
    """The module cannot be exported; the message says which node and why."""


# ---------------------------------------------------------------- op records


def _elements(shape):
    return int(math.prod(shape)) if shape else 1


def _spec(shape, dtype):
    return {"shape": [int(d) for d in shape], "dtype": dtype}


class _Graph:
    """Builds trident's graph JSON, op by op, inputs before their consumers."""

    def __init__(self, name):
        self.name = name
        self.ops = []
        self.specs = {}  # op name -> output spec
        self.extra = {}  # further top-level fields: "constants", "capture"

    def add(self, name, kind, inputs, shape, dtype="float32", attrs=None, params=(), fwd=0.0, bwd=0.0, act=0):
        if name in self.specs:
            raise ExportError("two ops would be named '%s'; rename a submodule" % name)
        op = {
            "name": name,
            "kind": kind,
            "attrs": attrs or {},
            "inputs": [{"op": i, "expected": self.specs[i]} for i in inputs],
            "output": _spec(shape, dtype),
            "params": [{"name": n, "shape": [int(d) for d in s], "dtype": "float32"} for n, s in params],
            "forward_flops": float(fwd),
            "backward_flops": float(bwd),
            "activation_bytes": int(act),
        }
        self.ops.append(op)
        self.specs[name] = op["output"]
        return name

    def to_json(self):
        return dict({"format": FORMAT, "name": self.name, "ops": self.ops}, **self.extra)


def _add_loss(g, logits, shape, dtype, label, loss, input_name):
    """The label's input op and trident's loss op over the model's output `logits` (per-sample `shape`)."""
    if loss == "mse":  # a float target of the output's shape
        n = _elements(shape)
        target = g.add(input_name(label), "input", [], shape, dtype, attrs={"field": label, "dtype": dtype})
        g.add("loss", "mse", [logits, target], [], fwd=3 * n, bwd=3 * n, act=8 * n)
        return
    if len(shape) < 1:
        raise ExportError("cross_entropy needs logits with a class axis per sample ([C], or [..., T, C] for a label "
                          "per position), got a scalar")
    # [C]: a class index per sample; [..., T, C]: one per position, -100 counting for nothing (trident's
    # Note [Token losses], PyTorch's ignore_index).
    target = g.add(input_name(label), "input", [], list(shape[:-1]), "int64", attrs={"field": label, "dtype": "int64"})
    n = _elements(shape)
    g.add("loss", "cross_entropy", [logits, target], [], fwd=4 * n, bwd=4 * n, act=4 * n)


# ------------------------------------------------------------- the exporter


def _where(node):
    """The user's line of Python that made `node`, when the tracer recorded it:
    the innermost frame outside torch and this exporter."""
    trace = getattr(node, "stack_trace", None) or node.meta.get("stack_trace")
    if not trace:
        return ""
    lines = trace.splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if text.startswith("File ") and "/torch/" not in text and "trident_export" not in text \
                and "<string>" not in text:
            src = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return " at %s: %s" % (text[len("File "):], src)
    return ""


def _target_name(node):
    t = node.target
    if isinstance(t, str):
        return t
    return getattr(t, "__module__", "") + "." + getattr(t, "__name__", repr(t))


def _unsupported(node, why):
    raise ExportError("cannot export fx node '%s' (%s %s): %s%s" % (node.name, node.op, _target_name(node), why,
                                                                   _where(node)))


def _pair(v):
    return [int(v[0]), int(v[1])] if isinstance(v, (tuple, list)) else [int(v), int(v)]


def _meta(node):
    m = node.meta.get("tensor_meta")
    if m is None or not hasattr(m, "shape"):
        return None
    return m


class _Exporter:
    def __init__(self, gm, inputs, label, loss, name):
        self.gm = gm
        self.inputs = inputs
        self.label = label
        self.loss = loss
        self.g = _Graph(name)
        self.op_of = {}  # fx node -> trident op name (or None: a shape value)
        self.modules = dict(gm.named_modules())
        self.called = {}
        self.pieces = {}  # split/chunk node -> (input op, axis, [(start, end)])

    def per_sample(self, node):
        m = _meta(node)
        if m is None:
            _unsupported(node, "its value is not a tensor")
        return list(m.shape)[1:], DTYPE_NAMES.get(m.dtype) or _unsupported(node, "dtype %s" % m.dtype)

    def arg(self, node, a):
        if not isinstance(a, torch.fx.Node) or self.op_of.get(a) is None:
            _unsupported(node, "argument %r is not a tensor of the graph (constants and Python values are not "
                         "supported here)" % (a,))
        return self.op_of[a]

    def run(self):
        names = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if [n.target for n in names] != list(self.inputs):
            raise ExportError("the module's forward takes (%s) but --input gave (%s); give one --input per forward "
                              "argument, in order" % (", ".join(n.target for n in names), ", ".join(self.inputs)))
        for node in self.gm.graph.nodes:
            getattr(self, "_" + node.op)(node)
        return self.g.to_json()

    # Node kinds.
    def input_name(self, field):
        # An input op is named after its field unless a submodule has that name.
        return field + "_input" if field in self.modules else field

    def _placeholder(self, node):
        shape, dtype = self.inputs[node.target]
        self.op_of[node] = self.g.add(self.input_name(node.target), "input", [], shape, DTYPE_NAMES[dtype],
                                      attrs={"field": node.target, "dtype": DTYPE_NAMES[dtype]})

    def _get_attr(self, node):
        _unsupported(node, "reading a parameter or buffer outside a submodule's call is not supported")

    def _output(self, node):
        out = node.args[0]
        if not isinstance(out, torch.fx.Node):
            _unsupported(node, "the module must return one tensor (the logits, or the prediction for mse)")
        shape, dtype = self.per_sample(out)
        try:
            _add_loss(self.g, self.arg(node, out), shape, dtype, self.label, self.loss, self.input_name)
        except ExportError as e:
            _unsupported(node, str(e))

    def _shape_value(self, node):
        """A node whose value is not a tensor (x.size(0), a getitem of it): allowed only where it feeds
        view/reshape, whose result shape the tracer recorded."""
        for user in node.users:
            if not (user.op == "call_method" and user.target in ("view", "reshape", "size")) and not (
                    user.op == "call_function" and user.target in (operator.getitem, torch.reshape)) and not (
                    user.op == "call_function" and user.target is getattr and self.op_of.get(user, 0) is None):
                _unsupported(node, "its value is not a tensor and feeds %s" % user.name)
        self.op_of[node] = None

    def _call_module(self, node):
        mod = self.modules[node.target]
        kind = type(mod)
        params = [(node.target + "." + n, p.shape) for n, p in mod.named_parameters(recurse=False)]
        if params:
            if node.target in self.called:
                _unsupported(node, "module '%s' is called twice (shared weights); trident gives every op its own "
                             "parameters" % node.target)
            self.called[node.target] = node
        name = node.target if params else node.name
        handler = _MODULES.get(kind)
        if handler is None:
            _unsupported(node, "module type %s is not supported (see docs/own-model.md)" % kind.__name__)
        self.op_of[node] = handler(self, node, mod, name, params)

    def _call_function(self, node):
        if node.target is operator.getitem and node.args[0] not in self.pieces and \
                self.op_of.get(node.args[0], 0) is None:
            return self._shape_value(node)
        handler = _FUNCTIONS.get(node.target)
        if handler is None:
            _unsupported(node, "function %s is not supported (see docs/own-model.md)" % _target_name(node))
        self.op_of[node] = handler(self, node, node.name)

    def _call_method(self, node):
        if node.target == "size":
            return self._shape_value(node)
        handler = _METHODS.get(node.target)
        if handler is None:
            _unsupported(node, "tensor method .%s() is not supported (see docs/own-model.md)" % node.target)
        self.op_of[node] = handler(self, node, node.name)


# ------------------------------------------------------------ op handlers


def _one_input(ex, node):
    return ex.arg(node, node.args[0])


def _linear(ex, node, mod, name, params):
    x = _one_input(ex, node)
    shape, _ = ex.per_sample(node)
    rows = _elements(shape[:-1])
    fwd = 2.0 * rows * mod.in_features * mod.out_features
    return ex.g.add(name, "linear", [x], shape, attrs={"in": mod.in_features, "out": mod.out_features,
                                                      "bias": mod.bias is not None},
                    params=params, fwd=fwd, bwd=2 * fwd, act=4 * _elements(ex.per_sample(node.args[0])[0]))


def _conv2d(ex, node, mod, name, params):
    if mod.groups != 1 or _pair(mod.dilation) != [1, 1] or mod.padding_mode != "zeros" or isinstance(mod.padding, str):
        _unsupported(node, "Conv2d with groups, dilation, a padding mode or 'same' padding is not supported")
    x = _one_input(ex, node)
    shape, _ = ex.per_sample(node)
    kh, kw = _pair(mod.kernel_size)
    fwd = 2.0 * mod.in_channels * kh * kw * _elements(shape)
    return ex.g.add(name, "conv2d", [x], shape,
                    attrs={"in": mod.in_channels, "out": mod.out_channels, "kernel": [kh, kw],
                           "stride": _pair(mod.stride), "padding": _pair(mod.padding), "bias": mod.bias is not None},
                    params=params, fwd=fwd, bwd=2 * fwd, act=4 * _elements(ex.per_sample(node.args[0])[0]))


def _pool(kind):
    def handler(ex, node, mod, name, params):
        if kind == "max_pool2d" and (_pair(mod.dilation) != [1, 1] or mod.return_indices):
            _unsupported(node, "MaxPool2d with dilation or return_indices is not supported")
        if mod.ceil_mode or (kind == "avg_pool2d" and (not mod.count_include_pad or mod.divisor_override)):
            _unsupported(node, "ceil_mode, count_include_pad=False and divisor_override are not supported")
        x = _one_input(ex, node)
        shape, _ = ex.per_sample(node)
        stride = mod.stride if mod.stride is not None else mod.kernel_size
        k = _pair(mod.kernel_size)
        return ex.g.add(name, kind, [x], shape,
                        attrs={"kernel": k, "stride": _pair(stride), "padding": _pair(mod.padding)},
                        fwd=_elements(shape) * k[0] * k[1], bwd=_elements(shape),
                        act=4 * (_elements(ex.per_sample(node.args[0])[0]) + _elements(shape)))
    return handler


def _adaptive_avg(ex, node, x, size, name):
    shape, _ = ex.per_sample(node)
    if isinstance(size, (tuple, list)) and None in size:
        _unsupported(node, "AdaptiveAvgPool2d with a None size is not supported")
    return ex.g.add(name, "adaptive_avg_pool2d", [x], shape, attrs={"size": _pair(size)},
                    fwd=_elements(ex.per_sample(node.args[0])[0]), bwd=_elements(ex.per_sample(node.args[0])[0]))


def _elementwise(kind, flops):
    def handler(ex, node, name):
        x = _one_input(ex, node)
        shape, dtype = ex.per_sample(node)
        n = _elements(shape)
        return ex.g.add(name, kind, [x], shape, dtype, fwd=flops * n, bwd=flops * n, act=4 * n)
    return handler


def _module_act(kind, flops):
    inner = _elementwise(kind, flops)

    def handler(ex, node, mod, name, params):
        if kind == "gelu" and getattr(mod, "approximate", "none") != "none":
            _unsupported(node, "GELU(approximate='tanh') is not supported")
        return inner(ex, node, name)
    return handler


def _flatten_common(ex, node, name, start, end):
    if start not in (1,) or end not in (-1,):
        _unsupported(node, "flatten is supported from dim 1 to the last only (start_dim=1, end_dim=-1)")
    x = _one_input(ex, node)
    shape, dtype = ex.per_sample(node)
    return ex.g.add(name, "flatten", [x], shape, dtype)


def _flatten_module(ex, node, mod, name, params):
    return _flatten_common(ex, node, name, mod.start_dim, mod.end_dim)


def _flatten_function(ex, node, name):
    start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
    end = node.args[2] if len(node.args) > 2 else node.kwargs.get("end_dim", -1)
    return _flatten_common(ex, node, name, start, end)


def _identity_module(ex, node, mod, name, params):
    return _one_input(ex, node)


def _dropout_common(ex, node, name, p):
    if not p:
        return _one_input(ex, node)
    shape, dtype = ex.per_sample(node)
    n = _elements(shape)
    return ex.g.add(name, "dropout", [_one_input(ex, node)], shape, dtype, attrs={"p": float(p)}, fwd=n, bwd=n,
                    act=n)


def _dropout_module(ex, node, mod, name, params):
    return _dropout_common(ex, node, name, mod.p)


def _dropout_function(ex, node, name):
    p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
    training = node.args[2] if len(node.args) > 2 else node.kwargs.get("training", True)
    return _dropout_common(ex, node, name, p if training else 0)


def _pool_function(kind):
    def handler(ex, node, name):
        names = ["kernel_size", "stride", "padding"]
        vals = dict(zip(names, node.args[1:4]))
        vals.update({k: v for k, v in node.kwargs.items() if k in names})
        rest = {k: v for k, v in node.kwargs.items() if k not in names}
        if len(node.args) > 4 or _pair(rest.get("dilation", 1)) != [1, 1] or \
                any(rest.get(k) for k in ("ceil_mode", "return_indices", "divisor_override")) or \
                rest.get("count_include_pad", True) is False:
            _unsupported(node, "%s is supported with kernel_size, stride and padding only" % kind)
        k = _pair(vals["kernel_size"])
        stride = vals.get("stride") or vals["kernel_size"]
        shape, _ = ex.per_sample(node)
        return ex.g.add(name, kind, [_one_input(ex, node)], shape,
                        attrs={"kernel": k, "stride": _pair(stride), "padding": _pair(vals.get("padding", 0))},
                        fwd=_elements(shape) * k[0] * k[1], bwd=_elements(shape),
                        act=4 * (_elements(ex.per_sample(node.args[0])[0]) + _elements(shape)))
    return handler


def _binary(kind):
    def handler(ex, node, name):
        a, b = node.args[0], node.args[1]
        scalar = (int, float)
        if isinstance(a, torch.fx.Node) != isinstance(b, torch.fx.Node) and isinstance(
                b if isinstance(a, torch.fx.Node) else a, scalar) and not isinstance(
                b if isinstance(a, torch.fx.Node) else a, bool):
            # A tensor and a Python number: x + 2, 1 - x, x / c.
            x, value, op = (a, b, kind) if isinstance(a, torch.fx.Node) else (b, a, "r" + kind)
            shape, dtype = ex.per_sample(node)
            return ex.g.add(name, "scalar", [ex.arg(node, x)], shape, dtype, attrs={"op": op, "value": float(value)},
                            fwd=_elements(shape), bwd=_elements(shape))
        if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)):
            _unsupported(node, "%s needs tensors or one tensor and a Python number" % kind)
        sa, _ = ex.per_sample(a)
        sb, _ = ex.per_sample(b)
        shape, dtype = ex.per_sample(node)
        if sa != sb:
            _unsupported(node, "%s needs operands of one shape (no broadcasting), got %s and %s" % (kind, sa, sb))
        return ex.g.add(name, kind, [ex.arg(node, a), ex.arg(node, b)], shape, dtype, fwd=_elements(shape),
                        bwd=_elements(shape), act=8 * _elements(shape) if kind in ("mul", "div") else 0)
    return handler


def _reshape(ex, node, name):
    x = _one_input(ex, node)
    shape, dtype = ex.per_sample(node)
    return ex.g.add(name, "reshape", [x], shape, dtype, attrs={"shape": shape})


def _join(kind, word):
    """torch.cat / torch.stack: several tensors along one per-sample axis (counted in the output)."""
    def handler(ex, node, name):
        xs = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        shape, dtype = ex.per_sample(node)
        dim = dim + len(shape) + 1 if dim < 0 else dim
        if dim == 0:
            _unsupported(node, "%s along the batch axis is not supported" % word)
        return ex.g.add(name, kind, [ex.arg(node, x) for x in xs], shape, dtype, attrs={"axis": dim - 1})
    return handler


def _adaptive_module(ex, node, mod, name, params):
    return _adaptive_avg(ex, node, _one_input(ex, node), mod.output_size, name)


def _adaptive_function(ex, node, name):
    size = node.args[1] if len(node.args) > 1 else node.kwargs["output_size"]
    return _adaptive_avg(ex, node, _one_input(ex, node), size, name)


def _layer_norm(ex, node, mod, name, params):
    shape, _ = ex.per_sample(node)
    if len(mod.normalized_shape) != 1 or not mod.elementwise_affine:
        _unsupported(node, "LayerNorm is supported over the last axis with elementwise_affine=True only")
    n = _elements(shape)
    return ex.g.add(name, "layer_norm", [_one_input(ex, node)], shape,
                    attrs={"dim": int(mod.normalized_shape[0]), "eps": float(mod.eps)}, params=params,
                    fwd=8 * n, bwd=16 * n, act=4 * n)


def _embedding_bag(ex, node, mod, name, params):
    if len(node.args) > 1 or node.kwargs or mod.mode not in ("mean", "sum") or mod.padding_idx is not None \
            or mod.max_norm is not None or getattr(mod, "include_last_offset", False):
        _unsupported(node, "EmbeddingBag is supported with mode mean or sum on fixed-size bags ([N, bag] ids), "
                     "without offsets, per_sample_weights, padding_idx or max_norm")
    ids, _ = ex.per_sample(node.args[0])
    if len(ids) != 1:
        _unsupported(node, "EmbeddingBag needs ids of shape [N, bag], got per sample %s" % ids)
    shape, _ = ex.per_sample(node)
    return ex.g.add(name, "embedding_bag", [_one_input(ex, node)], shape,
                    attrs={"rows": mod.num_embeddings, "dim": mod.embedding_dim, "mode": mod.mode}, params=params,
                    fwd=ids[0] * mod.embedding_dim, bwd=ids[0] * mod.embedding_dim, act=8 * ids[0])


def _embedding(ex, node, mod, name, params):
    if mod.padding_idx is not None or mod.max_norm is not None:
        _unsupported(node, "Embedding with padding_idx or max_norm is not supported")
    shape, _ = ex.per_sample(node)
    n = _elements(shape)
    return ex.g.add(name, "embedding", [_one_input(ex, node)], shape,
                    attrs={"rows": mod.num_embeddings, "dim": mod.embedding_dim}, params=params, fwd=n, bwd=n,
                    act=8 * _elements(ex.per_sample(node.args[0])[0]))


def _axis(ex, node, dim):
    rank = len(ex.per_sample(node.args[0])[0]) + 1
    dim = dim + rank if dim < 0 else dim
    if dim == 0:
        _unsupported(node, "an operation along the batch axis is not supported")
    return dim - 1


def _softmax_common(ex, node, name, dim):
    if dim is None:
        _unsupported(node, "softmax needs an explicit dim")
    shape, dtype = ex.per_sample(node)
    n = _elements(shape)
    return ex.g.add(name, "softmax", [_one_input(ex, node)], shape, dtype, attrs={"axis": _axis(ex, node, dim)},
                    fwd=5 * n, bwd=5 * n, act=4 * n)


def _softmax_module(ex, node, mod, name, params):
    return _softmax_common(ex, node, name, mod.dim)


def _softmax_function(ex, node, name):
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    return _softmax_common(ex, node, name, dim)


def _reduce(kind):
    def handler(ex, node, name):
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if not isinstance(dim, int) or node.kwargs.get("keepdim") or (len(node.args) > 2 and node.args[2]):
            _unsupported(node, "%s is supported over one axis (dim=int), without keepdim" % kind)
        shape, dtype = ex.per_sample(node)
        n = _elements(ex.per_sample(node.args[0])[0])
        return ex.g.add(name, kind, [_one_input(ex, node)], shape, dtype, attrs={"axis": _axis(ex, node, dim)},
                        fwd=n, bwd=n)
    return handler


def _permute_dims(ex, node, dims):
    rank = len(ex.per_sample(node.args[0])[0]) + 1
    dims = [d + rank if d < 0 else d for d in dims]
    if dims[0] != 0:
        _unsupported(node, "the batch axis must stay first")
    shape, dtype = ex.per_sample(node)
    return ex.g.add(node.name, "permute", [_one_input(ex, node)], shape, dtype,
                    attrs={"dims": [d - 1 for d in dims[1:]]})


def _permute(ex, node, name):
    dims = node.args[1:] if len(node.args) > 2 or not isinstance(node.args[1], (tuple, list)) else node.args[1]
    return _permute_dims(ex, node, list(dims))


def _transpose(ex, node, name):
    rank = len(ex.per_sample(node.args[0])[0]) + 1
    a, b = [d + rank if d < 0 else d for d in node.args[1:3]]
    dims = list(range(rank))
    dims[a], dims[b] = dims[b], dims[a]
    return _permute_dims(ex, node, dims)


def _matmul(ex, node, name):
    a, b = node.args[0], node.args[1]
    sa, _ = ex.per_sample(a)
    sb, _ = ex.per_sample(b)
    if len(sa) < 2 or len(sb) != len(sa) or sa[:-2] != sb[:-2]:
        _unsupported(node, "matmul/bmm is supported between per-sample matrices of one batch shape, got %s and %s"
                     % (sa, sb))
    shape, dtype = ex.per_sample(node)
    fwd = 2.0 * _elements(shape) * sa[-1]
    return ex.g.add(name, "matmul", [ex.arg(node, a), ex.arg(node, b)], shape, dtype, fwd=fwd, bwd=2 * fwd,
                    act=4 * (_elements(sa) + _elements(sb)))


def _batch_norm(ex, node, mod, name, params):
    if not mod.affine:
        _unsupported(node, "BatchNorm with affine=False is not supported")
    shape, _ = ex.per_sample(node)
    n = _elements(shape)
    return ex.g.add(name, "batch_norm", [_one_input(ex, node)], shape,
                    attrs={"features": mod.num_features, "eps": float(mod.eps)}, params=params,
                    fwd=8 * n, bwd=16 * n, act=4 * n)


def _multihead_attention(ex, node, mod, name, params):
    args = list(node.args) + [node.kwargs.get(k) for k in ("query", "key", "value") if k in node.kwargs]
    if len(args) != 3 or not (args[0] is args[1] is args[2]):
        _unsupported(node, "MultiheadAttention is supported as self-attention only: attn(x, x, x)")
    extra = {k: v for k, v in node.kwargs.items() if k not in ("query", "key", "value", "need_weights")}
    if any(v is not None for v in extra.values()) or not mod.batch_first or mod.dropout or \
            not mod._qkv_same_embed_dim or mod.in_proj_bias is None or mod.bias_k is not None:
        _unsupported(node, "MultiheadAttention is supported with batch_first=True, dropout=0, biases, "
                     "no masks and no add_bias_kv/kdim/vdim")
    for u in node.users:
        if not (u.op == "call_function" and u.target is operator.getitem and (u.args[1] == 0 or not u.users)):
            _unsupported(node, "only the attention output (result[0]) of MultiheadAttention is supported")
    shape, _ = ex.per_sample(node.args[0])
    seq, h = shape
    params = [(name + "." + n, p.shape) for n, p in mod.named_parameters()]
    fwd = 2.0 * seq * h * 4 * h + 4.0 * seq * seq * h
    return ex.g.add(name, "multihead_attention", [_one_input(ex, node)], shape,
                    attrs={"hidden": h, "heads": mod.num_heads}, params=params, fwd=fwd, bwd=2 * fwd,
                    act=4 * (5 * seq * h + mod.num_heads * seq * seq))


def _conv1d(ex, node, mod, name, params):
    if mod.groups != 1 or mod.dilation[0] != 1 or mod.padding_mode != "zeros" or isinstance(mod.padding, str):
        _unsupported(node, "Conv1d with groups, dilation, a padding mode or 'same' padding is not supported")
    shape, _ = ex.per_sample(node)
    fwd = 2.0 * mod.in_channels * mod.kernel_size[0] * _elements(shape)
    return ex.g.add(name, "conv1d", [_one_input(ex, node)], shape,
                    attrs={"in": mod.in_channels, "out": mod.out_channels, "kernel": mod.kernel_size[0],
                           "stride": mod.stride[0], "padding": mod.padding[0], "bias": mod.bias is not None},
                    params=params, fwd=fwd, bwd=2 * fwd, act=4 * _elements(ex.per_sample(node.args[0])[0]))


def _pieces(ex, node, name):
    """split/chunk: a tuple whose items (getitem nodes) become slices."""
    x = node.args[0]
    rank = len(ex.per_sample(x)[0]) + 1
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    dim = dim + rank if dim < 0 else dim
    if dim == 0:
        _unsupported(node, "split/chunk along the batch axis is not supported")
    size = ex.per_sample(x)[0][dim - 1]
    arg = node.args[1] if len(node.args) > 1 else node.kwargs.get("split_size_or_sections", node.kwargs.get("chunks"))
    chunk = node.target in (torch.chunk, "chunk")
    if chunk:
        step = -(-size // arg)
        bounds = [(s, min(s + step, size)) for s in range(0, size, step)]
    elif isinstance(arg, int):
        bounds = [(s, min(s + arg, size)) for s in range(0, size, arg)]
    else:
        starts = [sum(arg[:i]) for i in range(len(arg))]
        bounds = [(s, s + n) for s, n in zip(starts, arg)]
    ex.pieces[node] = (ex.arg(node, x), dim - 1, bounds)
    return None


def _getitem(ex, node, name):
    src, index = node.args
    if src in ex.pieces:
        x, axis, bounds = ex.pieces[src]
        start, end = bounds[index]
        shape, dtype = ex.per_sample(node)
        return ex.g.add(name, "slice", [x], shape, dtype, attrs={"axis": axis, "start": start, "end": end})
    if ex.op_of.get(src) is not None and ex.g.ops and src.op == "call_module" and \
            isinstance(ex.modules.get(src.target), torch.nn.MultiheadAttention):
        return ex.op_of[src] if index == 0 else None  # result[0]; the unused weights are dropped
    _unsupported(node, "indexing a tensor is not supported")


_MODULES = {
    torch.nn.Linear: _linear,
    torch.nn.Conv2d: _conv2d,
    torch.nn.MaxPool2d: _pool("max_pool2d"),
    torch.nn.AvgPool2d: _pool("avg_pool2d"),
    torch.nn.AdaptiveAvgPool2d: _adaptive_module,
    torch.nn.ReLU: _module_act("relu", 1),
    torch.nn.GELU: _module_act("gelu", 8),
    torch.nn.Tanh: _module_act("tanh", 8),
    torch.nn.Sigmoid: _module_act("sigmoid", 8),
    torch.nn.SiLU: _module_act("silu", 8),
    torch.nn.Flatten: _flatten_module,
    torch.nn.Identity: _identity_module,
    torch.nn.Dropout: _dropout_module,
    torch.nn.LayerNorm: _layer_norm,
    torch.nn.EmbeddingBag: _embedding_bag,
    torch.nn.Embedding: _embedding,
    torch.nn.Softmax: _softmax_module,
    torch.nn.BatchNorm1d: _batch_norm,
    torch.nn.BatchNorm2d: _batch_norm,
    torch.nn.MultiheadAttention: _multihead_attention,
    torch.nn.Conv1d: _conv1d,
}

_FUNCTIONS = {
    operator.add: _binary("add"), torch.add: _binary("add"),
    operator.sub: _binary("sub"), torch.sub: _binary("sub"),
    operator.mul: _binary("mul"), torch.mul: _binary("mul"),
    operator.truediv: _binary("div"), torch.div: _binary("div"),
    torch.relu: _elementwise("relu", 1), torch.nn.functional.relu: _elementwise("relu", 1),
    torch.tanh: _elementwise("tanh", 8), torch.sigmoid: _elementwise("sigmoid", 8),
    torch.nn.functional.silu: _elementwise("silu", 8), torch.nn.functional.gelu: _elementwise("gelu", 8),
    torch.flatten: _flatten_function,
    torch.reshape: _reshape,
    torch.cat: _join("concat", "cat"),
    torch.nn.functional.adaptive_avg_pool2d: _adaptive_function,
    torch.softmax: _softmax_function, torch.nn.functional.softmax: _softmax_function,
    torch.mean: _reduce("mean"), torch.sum: _reduce("sum"),
    torch.permute: _permute, torch.transpose: _transpose,
    torch.matmul: _matmul, torch.bmm: _matmul,
    torch.stack: _join("stack", "stack"), torch.split: _pieces, torch.chunk: _pieces,
    torch.nn.functional.dropout: _dropout_function, torch.nn.functional.tanh: _elementwise("tanh", 8),
    torch.nn.functional.sigmoid: _elementwise("sigmoid", 8),
    torch.nn.functional.max_pool2d: _pool_function("max_pool2d"),
    torch.nn.functional.avg_pool2d: _pool_function("avg_pool2d"),
    operator.getitem: _getitem,
}

_METHODS = {
    "view": _reshape, "reshape": _reshape, "flatten": _flatten_function,
    "relu": _elementwise("relu", 1), "sigmoid": _elementwise("sigmoid", 8), "tanh": _elementwise("tanh", 8),
    "softmax": _softmax_function, "mean": _reduce("mean"), "sum": _reduce("sum"),
    "permute": _permute, "transpose": _transpose, "matmul": _matmul,
    "split": _pieces, "chunk": _pieces,
}


# ------------------------------------------------------------------ the API


def _example(inputs, rows=2):
    out = []
    for shape, dtype in inputs.values():
        if dtype == torch.int64:
            out.append(torch.zeros((rows,) + tuple(shape), dtype=dtype))
        else:
            out.append(torch.randn((rows,) + tuple(shape), generator=torch.Generator().manual_seed(0)).to(dtype))
    return out


CAPTURES = ("aten", "fx")


def export_graph(module, inputs, label, loss="cross_entropy", name=None, capture="aten"):
    """The trident graph (a dict, "trident-graph/1") of `module`.
    inputs: {name: (per-sample shape, dtype)} in forward's argument order.
    capture: "aten" (make_fx, see Note [ATen capture] in trident_aten.py) or "fx" (torch.fx symbolic tracing onto
    trident's own op kinds)."""
    if capture not in CAPTURES:
        raise ExportError("capture '%s' is not supported; allowed: %s" % (capture, ", ".join(CAPTURES)))
    if loss not in LOSSES:
        raise ExportError("loss '%s' is not supported; allowed: %s" % (loss, ", ".join(LOSSES)))
    if not inputs:
        raise ExportError("no inputs: give each forward argument's name, per-sample shape and dtype")
    for field, (shape, dtype) in inputs.items():
        if dtype not in DTYPE_NAMES:
            raise ExportError("input '%s': dtype %s is not supported; allowed: %s" % (field, dtype,
                                                                                     ", ".join(DTYPES)))
    if label in inputs:
        raise ExportError("label '%s' is also a forward input; the label is compared with the output" % label)
    if capture == "aten":
        return _export_aten(module, inputs, label, loss, name or type(module).__name__)
    try:
        tracer = torch.fx.Tracer()
        tracer.record_stack_traces = True  # so that an unsupported node can name its line of Python
        gm = torch.fx.GraphModule(tracer.root if hasattr(tracer, "root") and tracer.root is not None else module,
                                  tracer.trace(module))
    except Exception as e:  # the tracer's own error says where
        raise ExportError("the model does not trace with torch.fx: %s: %s" % (type(e).__name__,
                                                                              str(e).splitlines()[0]))
    try:
        ShapeProp(gm).propagate(*_example(inputs))
    except Exception as e:
        raise ExportError("the model does not run on the given inputs (%s): %s: %s" % (
            ", ".join("%s %s %s" % (k, list(s), DTYPE_NAMES[d]) for k, (s, d) in inputs.items()),
            type(e).__name__, str(e).splitlines()[0]))
    return _Exporter(gm, inputs, label, loss, name or type(module).__name__).run()


def _forward_arguments(module):
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    return [p.name for p in params]


def _export_aten(module, inputs, label, loss, name):
    import trident_aten
    wanted = _forward_arguments(module)  # inputs are passed by position, so only their number must agree
    if wanted is not None and len(wanted) != len(inputs):
        raise ExportError("the module's forward takes (%s) but --input gave (%s); give one --input per forward "
                          "argument, in order" % (", ".join(wanted), ", ".join(inputs)))
    g = _Graph(name)
    ops = {f: g.add(f, "input", [], shape, DTYPE_NAMES[d], attrs={"field": f, "dtype": DTYPE_NAMES[d]})
           for f, (shape, d) in inputs.items()}
    try:
        logits, constants, record = trident_aten.capture(module, inputs, g, ops)
    except trident_aten.CaptureError as e:
        raise ExportError(str(e))
    spec = g.specs[logits]
    _add_loss(g, logits, spec["shape"], spec["dtype"], label, loss, lambda f: f + "_input" if f in g.specs else f)
    g.extra = {"capture": record, "constants": constants}
    return g.to_json()


def _write_atomic(path, write):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix="tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def export(module, inputs, label, loss="cross_entropy", out_dir=".", name=None, capture="aten"):
    """Writes out_dir/model.json and out_dir/init.pt; returns their paths."""
    graph = export_graph(module, inputs, label, loss, name, capture)
    os.makedirs(out_dir, exist_ok=True)
    graph_path, weights_path = os.path.join(out_dir, "model.json"), os.path.join(out_dir, "init.pt")
    declared = {p["name"] for op in graph["ops"] for p in op["params"]}
    weights = {k: v.detach().clone().contiguous() for k, v in module.named_parameters() if k in declared}
    # LibTorch 1.13 cannot unpickle a dict of one entry (Python writes it with SETITEM), so the file always
    # carries its format's number beside the weights.
    weights["__format__"] = torch.tensor([1])

    def write_graph(p):
        with open(p, "w") as f:
            json.dump(graph, f, indent=1)
            f.write("\n")
    _write_atomic(graph_path, write_graph)
    _write_atomic(weights_path, lambda p: torch.save(weights, p))
    return graph_path, weights_path


# ------------------------------------------------------------ command line


def _parse_input(text):
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise ExportError("--input '%s' must be NAME:SHAPE:DTYPE, e.g. image:1,28,28:float32 or ids:26:int64" % text)
    name, shape, dtype = parts
    try:
        dims = tuple(int(d) for d in shape.split(",")) if shape else ()
    except ValueError:
        raise ExportError("--input '%s': the shape '%s' must be integers like 1,28,28" % (text, shape))
    if dtype not in DTYPES:
        raise ExportError("--input '%s': dtype '%s' is unknown; allowed: %s" % (text, dtype, ", ".join(DTYPES)))
    return name, (dims, DTYPES[dtype])


def _load_module(spec, args):
    if ":" not in spec:
        raise ExportError("MODULE '%s' must be FILE.py:NAME (a class or function in the file)" % spec)
    path, attr = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise ExportError("MODULE '%s': no such file %s" % (spec, path))
    loaded = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(loaded)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    loaded.loader.exec_module(mod)
    if not hasattr(mod, attr):
        raise ExportError("MODULE '%s': %s has no '%s'" % (spec, path, attr))
    made = getattr(mod, attr)(**args) if isinstance(args, dict) else getattr(mod, attr)(*args)
    if not isinstance(made, torch.nn.Module):
        raise ExportError("MODULE '%s': calling it gave a %s, not an nn.Module" % (spec, type(made).__name__))
    return made


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="FILE.py:NAME, a class or function that builds the nn.Module")
    ap.add_argument("--args", default="[]", help="JSON list or object of arguments for NAME")
    ap.add_argument("--input", action="append", default=[], help="NAME:SHAPE:DTYPE, once per forward argument")
    ap.add_argument("--label", default="label", help="the target's input name (default: label)")
    ap.add_argument("--loss", default="cross_entropy",
                    help="cross_entropy (int64 class ids) or mse (float targets of the output's shape)")
    ap.add_argument("--name", help="the model's name (default: the module's class name)")
    ap.add_argument("--capture", default="aten", choices=CAPTURES,
                    help="aten (default): record the ATen operators the module runs; fx: torch.fx symbolic "
                         "tracing onto trident's own op kinds")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before building the module")
    ap.add_argument("--out", required=True, help="directory for model.json and init.pt")
    a = ap.parse_args(argv)
    try:
        try:
            args = json.loads(a.args)
        except json.JSONDecodeError as e:
            raise ExportError("--args '%s' is not JSON: %s" % (a.args, e))
        inputs = dict(_parse_input(t) for t in a.input)
        torch.manual_seed(a.seed)
        module = _load_module(a.module, args)
        graph_path, weights_path = export(module, inputs, a.label, a.loss, a.out, a.name, a.capture)
    except ExportError as e:
        print("trident_export: %s" % e, file=sys.stderr)
        return 2
    with open(graph_path) as f:
        ops = len(json.load(f)["ops"])
    print("exported %s: %d ops; wrote %s and %s" % (a.module, ops, graph_path, weights_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
