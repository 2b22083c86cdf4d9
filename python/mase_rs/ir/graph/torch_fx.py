"""Tracing a `torch.nn.Module` with torch.fx into a mase-rs graph (needs torch).

`MaseGraph(model=module)` calls `from_module`: `torch.fx.symbolic_trace` records the forward,
each fx node is mapped onto a mase-rs op here (modules by their class, functions and tensor
methods by their target), and Rust builds the graph with fx's node names and the module's
`state_dict()` as weights. Nodes that have no mase-rs op are all listed in one `ValueError`.

>>> import torch.nn as nn
>>> from mase_rs import MaseGraph
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.seq_blocks = nn.Sequential(nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5))
...     def forward(self, x):
...         return self.seq_blocks(x)
>>> [n.name for n in MaseGraph(model=Net()).nodes]
['x', 'seq_blocks_0', 'seq_blocks_1', 'seq_blocks_2', 'output']
"""

import json
import operator
import sys
from collections import OrderedDict

import numpy as np

from mase_rs import _native


class _NoOp(Exception):
    """A node that has no mase-rs op; the message says why."""


# Nodes that compute nothing (their value is their first input's): fx keeps them, mase-rs
# passes their input on.
_ALIAS = "alias"


def _pair(v, n):
    """A per-dimension size (`3` or `(3, 3)`) as a list of `n` ints."""
    if isinstance(v, int):
        return [v] * n
    v = [int(x) for x in v]
    if len(v) != n:
        raise _NoOp(f"{v} needs {n} entries")
    return v


def _conv(m, dims):
    if m.padding_mode != "zeros":
        raise _NoOp(f"padding_mode `{m.padding_mode}` (only zeros)")
    kernel, stride, dilation = _pair(m.kernel_size, dims), _pair(m.stride, dims), _pair(m.dilation, dims)
    if m.padding == "valid":
        padding = [0] * dims
    elif m.padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(t % 2 for t in total) or any(s != 1 for s in stride):
            raise _NoOp("padding `same` with an even window (asymmetric padding)")
        padding = [t // 2 for t in total]
    else:
        padding = _pair(m.padding, dims)
    return {
        "op": f"conv{dims}d",
        "in_channels": m.in_channels,
        "out_channels": m.out_channels,
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "groups": m.groups,
        "bias": m.bias is not None,
    }


def _batch_norm(m, dims):
    if m.momentum is None:
        raise _NoOp("momentum=None (a cumulative average) is not supported")
    if not m.track_running_stats:
        raise _NoOp("track_running_stats=False is not supported")
    return {"op": f"batch_norm{dims}d", "num_features": m.num_features, "eps": m.eps, "momentum": m.momentum, "affine": m.affine}


def _pool(
    kind,
    dims,
    kernel,
    stride,
    padding,
    dilation=1,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
    return_indices=False,
):
    if _pair(dilation, dims) != [1] * dims:
        raise _NoOp("dilation other than 1 is not supported")
    if divisor_override is not None or return_indices:
        raise _NoOp("divisor_override and return_indices are not supported")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    op = {
        "op": f"{kind}_pool{dims}d",
        "kernel": _pair(kernel, dims),
        "stride": _pair(stride, dims),
        "padding": _pair(padding, dims),
    }
    # Written only away from PyTorch's defaults, as the Rust graph writes them.
    if ceil_mode:
        op["ceil_mode"] = True
    if kind == "avg" and not count_include_pad:
        op["count_include_pad"] = False
    return op


def _layer_norm(m):
    return {
        "op": "layer_norm",
        "normalized_shape": [int(d) for d in m.normalized_shape],
        "eps": float(m.eps),
        "elementwise_affine": bool(m.elementwise_affine),
        "bias": getattr(m, "bias", None) is not None,
    }


def _group_norm(m):
    return {
        "op": "group_norm",
        "num_groups": int(m.num_groups),
        "num_channels": int(m.num_channels),
        "eps": float(m.eps),
        "affine": bool(m.affine),
        "bias": getattr(m, "bias", None) is not None,
    }


def _norm_affine(call, k):
    """The input, weight and bias nodes of `F.layer_norm`/`F.group_norm` (weight and bias at
    positions `k` and `k + 1`, each may be None)."""
    w, b = call.get(k, "weight"), call.get(k + 1, "bias")
    if w is None and b is not None:
        raise _NoOp("a bias without a weight is not supported")
    return [call.get(0, "input")] + [v for v in (w, b) if v is not None]


def _fn_layer_norm(call):
    shape = call.get(1, "normalized_shape")
    shape = [int(shape)] if isinstance(shape, int) else [int(d) for d in shape]
    eps = float(call.get(4, "eps", 1e-5))
    op = {"op": "layer_norm", "normalized_shape": shape, "eps": eps, "elementwise_affine": False, "bias": False}
    return op, _norm_affine(call, 2)


def _fn_group_norm(call):
    ins = _norm_affine(call, 2)
    # The channel count comes from the weight (a `get_attr` tensor), as the trace has no shapes.
    w = ins[1] if len(ins) > 1 else None
    if w is None or not _is_node(w) or w.op != "get_attr":
        raise _NoOp("group_norm without a weight attribute (its channel count is unknown before a forward run)")
    channels = int(_attribute(w.graph.owning_module, w.target).shape[0])
    eps = float(call.get(4, "eps", 1e-5))
    op = {"op": "group_norm", "num_groups": int(call.get(1, "num_groups")), "num_channels": channels, "eps": eps, "affine": False, "bias": False}
    return op, ins


def _adaptive(dims, output_size, kind="avg", return_indices=False):
    size = _pair(output_size, dims) if not (isinstance(output_size, (tuple, list)) and None in output_size) else None
    if size is None:
        raise _NoOp("output_size with None entries is not supported")
    if return_indices:
        raise _NoOp("return_indices is not supported")
    return (
        {"op": f"adaptive_{kind}_pool1d", "output_size": size[0]}
        if dims == 1
        else {"op": f"adaptive_{kind}_pool2d", "output_size": size}
    )


def _dim(dim, what):
    if dim is None:
        raise _NoOp(f"{what} without dim is not supported")
    return int(dim)


def _softplus(call):
    beta, threshold = call.get(1, "beta", 1.0), call.get(2, "threshold", 20.0)
    if _is_node(beta) or _is_node(threshold):
        raise _NoOp("tensor beta or threshold is not supported")
    return {"op": "softplus", "beta": float(beta), "threshold": float(threshold)}, [call.get(0, "input")]


def _reduce(name):
    """`torch.<name>(input, dim, keepdim)` or `x.<name>(dim, keepdim)`: `dim` an int, a tuple or
    list of ints, or None (every element; `()` too, as PyTorch reads it)."""

    def op(call):
        dim, keepdim = call.get(1, "dim"), call.get(2, "keepdim", False)
        if call.get(3, "dtype") is not None or call.kwargs.get("out") is not None:
            raise _NoOp("dtype and out are not supported")
        if dim is None:
            dims = []
        elif isinstance(dim, int):
            dims = [dim]
        elif isinstance(dim, (tuple, list)) and all(isinstance(d, int) for d in dim):
            dims = [int(d) for d in dim]
        else:
            raise _NoOp(f"dim {dim!r} is neither an int, a list of ints nor None")
        if not isinstance(keepdim, bool):
            raise _NoOp(f"keepdim {keepdim!r} is not a bool")
        return {"op": name, "dims": dims, "keepdim": keepdim}, [call.get(0, "input")]

    return op


def _linear(m):
    return {"op": "linear", "in_features": m.in_features, "out_features": m.out_features, "bias": m.bias is not None}


def _module_table(nn):
    """`nn.Module` class -> function of the module giving its op."""
    from mase_rs.nn import embedding as mase_embedding
    from mase_rs.nn import stochastic_depth as mase_nn
    depth = lambda m: {"op": "stochastic_depth", "p": float(m.p), "mode": m.mode}  # noqa: E731
    table = {
        nn.Linear: _linear,
        # The output projection of `nn.MultiheadAttention`: a linear layer under another name.
        nn.modules.linear.NonDynamicallyQuantizableLinear: _linear,
        nn.Conv1d: lambda m: _conv(m, 1),
        nn.Conv2d: lambda m: _conv(m, 2),
        nn.BatchNorm1d: lambda m: _batch_norm(m, 1),
        nn.BatchNorm2d: lambda m: _batch_norm(m, 2),
        nn.ReLU: lambda m: {"op": "relu"},
        nn.ReLU6: lambda m: {"op": "relu6"},
        nn.LeakyReLU: lambda m: {"op": "leaky_relu", "negative_slope": m.negative_slope},
        nn.Sigmoid: lambda m: {"op": "sigmoid"},
        nn.Tanh: lambda m: {"op": "tanh"},
        nn.SELU: lambda m: {"op": "selu"},
        nn.GELU: lambda m: {"op": "gelu", "tanh": m.approximate == "tanh"},
        nn.SiLU: lambda m: {"op": "silu"},
        nn.Hardswish: lambda m: {"op": "hardswish"},
        nn.Hardsigmoid: lambda m: {"op": "hardsigmoid"},
        nn.Softplus: lambda m: {"op": "softplus", "beta": float(m.beta), "threshold": float(m.threshold)},
        nn.Mish: lambda m: {"op": "mish"},
        nn.Softmax: lambda m: {"op": "softmax", "dim": _dim(m.dim, "Softmax")},
        nn.LogSoftmax: lambda m: {"op": "log_softmax", "dim": _dim(m.dim, "LogSoftmax")},
        nn.MaxPool1d: lambda m: _pool(
            "max", 1, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, return_indices=m.return_indices
        ),
        nn.MaxPool2d: lambda m: _pool(
            "max", 2, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, return_indices=m.return_indices
        ),
        nn.AvgPool1d: lambda m: _pool("avg", 1, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode, m.count_include_pad),
        nn.AvgPool2d: lambda m: _pool(
            "avg", 2, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode, m.count_include_pad, m.divisor_override
        ),
        nn.AdaptiveAvgPool1d: lambda m: _adaptive(1, m.output_size),
        nn.AdaptiveAvgPool2d: lambda m: _adaptive(2, m.output_size),
        nn.Flatten: lambda m: {"op": "flatten", "start_dim": m.start_dim, "end_dim": m.end_dim},
        nn.Dropout: lambda m: {"op": "dropout", "p": m.p},
        nn.Identity: lambda m: _ALIAS,
        nn.AdaptiveMaxPool1d: lambda m: _adaptive(1, m.output_size, "max", m.return_indices),
        nn.AdaptiveMaxPool2d: lambda m: _adaptive(2, m.output_size, "max", m.return_indices),
        nn.LayerNorm: _layer_norm,
        nn.GroupNorm: _group_norm,
        mase_nn.StochasticDepth: depth,
        nn.Embedding: _embedding,
        mase_embedding.Embedding: _embedding,
    }
    # torchvision's own module, when the model came with torchvision (never imported here).
    tv_ops = sys.modules.get("torchvision.ops")
    if tv_ops is not None and hasattr(tv_ops, "StochasticDepth"):
        table[tv_ops.StochasticDepth] = depth
    return table


class _Call:
    """The arguments of one fx call: positional `args` and `kwargs`, read by position or name."""

    def __init__(self, node, skip=0):
        self.node, self.args, self.kwargs = node, node.args[skip:], dict(node.kwargs)

    def get(self, i, name, default=None):
        if i is not None and i < len(self.args):
            return self.args[i]
        return self.kwargs.get(name, default)


def _is_node(v):
    return type(v).__name__ == "Node" and hasattr(v, "op")


class _Scalar:
    """A number operand (`x * 2.0`): a constant the graph reads with a `get_attr` node."""

    def __init__(self, value):
        self.value = value


def _scalar(v, op):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _NoOp(f"operand {v!r} is neither a tensor nor a number; mase-rs {op} takes tensors")
    return _Scalar(float(v))


def _operands(values, op):
    """`values` (tensors and numbers) as the inputs of `op`, numbers as `_Scalar`s; at least one
    must be a tensor."""
    ins = [v if _is_node(v) else _scalar(v, op) for v in values]
    if not any(_is_node(v) for v in ins):
        raise _NoOp("no tensor operand")
    return ins


def _binary(name):
    def op(call):
        a, b = call.get(0, "input"), call.get(1, "other")
        if name in _SIZE_OPS and (_is_int_node(a) or _is_int_node(b)):
            return _size_arith(_SIZE_OPS[name], a, b)
        if name in ("add", "sub") and call.get(2, "alpha", 1) != 1:
            raise _NoOp("alpha other than 1 is not supported")
        if name == "div" and call.get(2, "rounding_mode") is not None:
            raise _NoOp("rounding_mode is not supported")
        return {"op": name}, _operands((a, b), name)

    return op


def _compare(name):
    """A comparison (`x > 0`, `torch.eq(a, b)`, `x.lt(y)`): 1.0 where it holds, 0.0 elsewhere,
    the graph's float for PyTorch's bool."""

    def op(call):
        a, b = call.get(0, "input"), call.get(1, "other")
        if _is_int_node(a) or _is_int_node(b):
            raise _NoOp("a comparison of sizes is not supported (it would steer the forward by a shape)")
        return {"op": name}, _operands((a, b), name)

    return op


def _logical_not(call):
    """`torch.logical_not(x)`: whether `x` is 0, which is `x == 0` for every dtype."""
    x = call.get(0, "input")
    return {"op": "eq"}, [x, _Scalar(0.0)]


def _is_bool(n):
    """Whether the fx node's value is known to be a bool tensor: a comparison's, a `~` or
    `logical_not` of one, a bool tensor attribute, or a forward argument given as bool in
    `MaseGraph(input_dtypes=...)`."""
    import torch

    if n.op == "placeholder":
        return _input_dtype(n) == torch.bool
    if n.op == "get_attr":
        return getattr(_attribute(n.graph.owning_module, n.target), "dtype", None) == torch.bool
    fns = {f for make in _COMPARISONS.values() for f in make(torch)} | {operator.invert, torch.logical_not}
    if n.op == "call_function":
        return n.target in fns
    return n.op == "call_method" and n.target in (*_COMPARISONS, "logical_not", "bool")


def _invert(call):
    """`~mask` of a bool tensor (its logical not); `~` of other values is a bitwise not, which
    the graph's floats do not hold."""
    x = call.get(0, "input")
    if not _is_node(x) or not _is_bool(x):
        raise _NoOp("`~` of a value not known to be a bool tensor (a comparison or a bool attribute) is not supported")
    return _logical_not(call)


def _where(call):
    """`torch.where(condition, input, other)`; numbers may stand for either value."""
    if len(call.args) + len(call.kwargs) < 3:
        raise _NoOp("torch.where(condition) (the indices where it holds) is not supported; give the two values")
    c, a, b = call.get(0, "condition"), call.get(1, "input"), call.get(2, "other")
    if not _is_node(c):
        raise _NoOp(f"the condition {c!r} is not a tensor")
    return {"op": "where"}, [c] + [v if _is_node(v) else _scalar(v, "where") for v in (a, b)]


def _masked_fill(call):
    """`x.masked_fill(mask, value)`: `where(mask, value, x)`."""
    x, mask, value = call.get(0, "input"), call.get(1, "mask"), call.get(2, "value")
    if not _is_node(mask):
        raise _NoOp(f"the mask {mask!r} is not a tensor")
    return {"op": "where"}, [mask, value if _is_node(value) else _scalar(value, "masked_fill"), x]


def _unary(op_json):
    return lambda call: (dict(op_json), [call.get(0, "input")])


def _shape_args(call, skip):
    """The target shape of `view`/`reshape` (from argument `skip` on: ints, size nodes, or one
    tuple of them) as mase-rs dims, and the nodes the dims read."""
    rest = call.args[skip:] if len(call.args) > skip else [call.kwargs.get("shape", call.kwargs.get("size"))]
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        rest = list(rest[0])
    dims, extra = [], []
    for d in rest:
        if _is_node(d):
            extra.append(d)
            dims.append({"input": len(extra)})
        elif isinstance(d, int):
            dims.append({"const": d})
        else:
            raise _NoOp(f"shape entry {d!r} is neither an int nor x.size(d)")
    return dims, extra


def _view(call, skip=1):
    dims, extra = _shape_args(call, skip)
    return {"op": "reshape", "shape": dims}, [call.args[0], *extra]


def _flatten(call, default_start):
    return {"op": "flatten", "start_dim": call.get(1, "start_dim", default_start), "end_dim": call.get(2, "end_dim", -1)}, [
        call.get(0, "input")
    ]


def _permute(call):
    dims = call.args[1:] if len(call.args) > 1 else [call.kwargs["dims"]]
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = list(dims[0])
    return {"op": "permute", "dims": [int(d) for d in dims]}, [call.args[0]]


def _clamp(call):
    lo, hi = call.get(1, "min"), call.get(2, "max")
    if _is_node(lo) or _is_node(hi):
        raise _NoOp("tensor bounds are not supported")
    lo = -3.4028234663852886e38 if lo is None else float(lo)
    hi = 3.4028234663852886e38 if hi is None else float(hi)
    return {"op": "clip", "min": lo, "max": hi}, [call.get(0, "input")]


def _cat(call):
    tensors = call.get(0, "tensors")
    if not isinstance(tensors, (tuple, list)) or not all(_is_node(t) for t in tensors):
        raise _NoOp("cat of anything but a list of tensors")
    return {"op": "concat", "dim": int(call.get(1, "dim", 0))}, list(tensors)


def _pad(call):
    pad = list(call.get(1, "pad"))
    if call.get(2, "mode", "constant") != "constant":
        raise _NoOp(f"mode `{call.get(2, 'mode')}` (only constant)")
    if len(pad) % 2 or any(p < 0 for p in pad):
        raise _NoOp(f"pad {pad} (non-negative pairs only)")
    # F.pad lists (begin, end) pairs from the last dimension backwards.
    pairs = [pad[i : i + 2] for i in range(0, len(pad), 2)][::-1]
    value = call.get(3, "value", 0.0)
    return {"op": "pad", "begin": [p[0] for p in pairs], "end": [p[1] for p in pairs], "value": float(value or 0.0)}, [
        call.get(0, "input")
    ]


def _dropout(call):
    # `F.dropout(x, p, training=False)` as traced is the identity.
    if call.get(2, "training", True) is False:
        return _ALIAS, [call.get(0, "input")]
    return {"op": "dropout", "p": float(call.get(1, "p", 0.5))}, [call.get(0, "input")]


def _stochastic_depth(call):
    # As `F.dropout`: traced with `training=False` it is the identity.
    x = call.get(0, "input")
    if call.get(3, "training", True) is False:
        return _ALIAS, [x]
    return {"op": "stochastic_depth", "p": float(call.get(1, "p")), "mode": call.get(2, "mode")}, [x]


def _fn_pool(kind, dims):
    """`F.max_poolNd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)` or
    `F.avg_poolNd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)`."""

    def op(call):
        c = call
        window = (c.get(1, "kernel_size"), c.get(2, "stride"), c.get(3, "padding", 0))
        if kind == "max":
            rest = {
                "dilation": c.get(4, "dilation", 1),
                "ceil_mode": c.get(5, "ceil_mode", False),
                "return_indices": c.get(6, "return_indices", False),
            }
        else:
            rest = {
                "ceil_mode": c.get(4, "ceil_mode", False),
                "count_include_pad": c.get(5, "count_include_pad", True),
                "divisor_override": c.get(6, "divisor_override"),
            }
        return _pool(kind, dims, *window, **rest), [c.get(0, "input")]

    return op


# Shapes and indexing. Sizes (`x.size()`, `x.shape`) and the tuples of `chunk`, `split` and
# `unbind` are no values of the graph: each entry a forward reads (`n, c, h, w = x.size()`,
# `x1, x2 = x.chunk(2, dim=1)`) becomes its own node, a `size` or an `index` of the tensor,
# so every node stays one tensor or one integer.

_SIZE_OPS = {"add": "add", "sub": "sub", "mul": "mul"}
_FULL = {"slice": {"start": None, "end": None, "step": 1}}


def _is_method(n, name):
    return _is_node(n) and n.op == "call_method" and n.target == name


def _is_function(n, *fns):
    return _is_node(n) and n.op == "call_function" and any(n.target is f for f in fns)


def _sizes_of(n):
    """The fx node of the tensor whose sizes the fx node `n` is (`x.size()`, `x.shape`), or None."""
    if _is_method(n, "size") and len(n.args) == 1 and n.kwargs.get("dim") is None:
        return n.args[0]
    if _is_function(n, getattr) and len(n.args) == 2 and n.args[1] == "shape":
        return n.args[0]
    return None


def _is_int_node(n):
    """Whether the fx node `n` is an integer the graph computes from sizes: `x.size(d)`, an
    entry of `x.size()` or `x.shape`, or arithmetic on those."""
    if not _is_node(n):
        return False
    if _is_method(n, "size") and (len(n.args) > 1 or n.kwargs.get("dim") is not None):
        return True
    if _is_function(n, operator.getitem):
        return _sizes_of(n.args[0]) is not None
    if _is_function(n, operator.add, operator.sub, operator.mul, operator.floordiv):
        return any(_is_int_node(a) for a in n.args)
    return False


def _size_operand(v, ins):
    if _is_node(v):
        if not _is_int_node(v):
            raise _NoOp(f"operand `{v.name}` is a tensor in arithmetic on sizes")
        ins.append(v)
        return {"input": len(ins) - 1}
    if isinstance(v, bool) or not isinstance(v, int):
        raise _NoOp(f"operand {v!r} of arithmetic on sizes is not an int")
    return {"const": v}


def _size_arith(arith, a, b):
    ins = []
    args = [_size_operand(a, ins), _size_operand(b, ins)]
    return {"op": "size_arith", "arith": arith, "args": args}, ins


def _floordiv(call):
    a, b = call.get(0, "input"), call.get(1, "other")
    if not (_is_int_node(a) or _is_int_node(b)):
        raise _NoOp("floor division of tensors is not supported")
    return _size_arith("floor_div", a, b)


def _read_by_getitem(call, what):
    """Checks that every user of the call's node reads one entry of it (`t[0]`)."""
    bad = [u.name for u in call.node.users if not (_is_function(u, operator.getitem) and isinstance(u.args[1], int))]
    if bad:
        raise _NoOp(f"{what} is used whole by {', '.join(bad)}; mase-rs reads its entries one by one (`{what}[0]`)")


def _size(call):
    dim = call.get(1, "dim")
    if dim is None:
        _read_by_getitem(call, "x.size()")
        return _ALIAS, [call.args[0]]
    return {"op": "size", "dim": int(dim)}, [call.args[0]]


def _getattr(call):
    if call.args[1] != "shape":
        raise _NoOp(f"attribute `{call.args[1]}` of a tensor")
    _read_by_getitem(call, "x.shape")
    return _ALIAS, [call.args[0]]


def _items_at(dim, item):
    """Full slices up to dimension `dim`, then `item` (after an ellipsis when `dim` is negative)."""
    dim = int(dim)
    return [_FULL] * dim + [item] if dim >= 0 else ["ellipsis", item] + [_FULL] * (-dim - 1)


def _split_args(n):
    """`(tensor, kind, arg, dim)` of an fx node that splits a tensor into a tuple
    (`chunk`, `split`, `unbind`, as methods or torch functions), or None."""
    import torch

    for kind in ("chunk", "split", "unbind"):
        fn = getattr(torch, kind)
        if _is_method(n, kind) or _is_function(n, fn):
            c = _Call(n)
            x = c.get(0, "input", c.kwargs.get("tensor"))
            if kind == "unbind":
                return x, kind, None, c.get(1, "dim", 0)
            arg = c.get(1, "chunks" if kind == "chunk" else "split_size_or_sections", c.kwargs.get("split_size"))
            return x, kind, arg, c.get(2, "dim", 0)
    return None


def _piece(kind, arg, dim, k):
    """The items of piece `k` of a `chunk`, `split` or `unbind` along `dim`."""
    if _is_node(dim) or _is_node(arg):
        raise _NoOp(f"{kind} with computed arguments")
    if kind == "unbind":
        return _items_at(dim, {"select": k})
    if kind == "chunk":
        return _items_at(dim, {"chunk": {"chunks": int(arg), "index": k}})
    # Whether the piece exists (and, for sizes, whether they add up) depends on the size of
    # `dim`, which the graph checks when it knows it.
    if isinstance(arg, int):
        return _items_at(dim, {"split": {"size": arg, "index": k}})
    sizes = [int(v) for v in arg]
    if not 0 <= k < len(sizes):
        raise _NoOp(f"piece {k} of a split into {len(sizes)}")
    return _items_at(dim, {"sections": {"sizes": sizes, "index": k}})


def _split(call):
    _read_by_getitem(call, f"{call.node.target if isinstance(call.node.target, str) else call.node.target.__name__}(...)")
    return _ALIAS, [call.get(0, "input", call.kwargs.get("tensor"))]


def _index_item(v):
    if v is None:
        return "new_axis"
    if v is Ellipsis:
        return "ellipsis"
    if isinstance(v, bool) or _is_node(v):
        raise _NoOp(f"subscript {v!r} (mase-rs takes ints, slices, None and ...)")
    if isinstance(v, int):
        return {"select": v}
    if isinstance(v, slice):
        parts = (v.start, v.stop, v.step)
        if any(p is not None and (isinstance(p, bool) or not isinstance(p, int)) for p in parts):
            raise _NoOp(f"slice {v!r} with bounds other than ints")
        if v.step is not None and v.step <= 0:
            raise _NoOp(f"slice {v!r}: the step must be positive")
        return {"slice": {"start": v.start, "end": v.stop, "step": 1 if v.step is None else v.step}}
    raise _NoOp(f"subscript {v!r} (mase-rs takes ints, slices, None and ...)")


def _getitem(call):
    """`t[k]`: an entry of a size tuple (a `size` node), a piece of a split tensor (an `index`
    node of the tensor), or a subscript of a tensor."""
    src, idx = call.args[0], call.args[1]
    sized = _sizes_of(src)
    if sized is not None:
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise _NoOp(f"size entries {idx!r} (mase-rs reads them one int at a time)")
        return {"op": "size", "dim": idx}, [sized]
    split = _split_args(src)
    if split is not None:
        x, kind, arg, dim = split
        return {"op": "index", "items": _piece(kind, arg, dim, idx)}, [x]
    if not _is_node(src):
        raise _NoOp("subscript of something other than a tensor")
    items = [_index_item(v) for v in (idx if isinstance(idx, tuple) else (idx,))]
    return {"op": "index", "items": items}, [src]


def _unsqueeze(call):
    dim = int(call.get(1, "dim"))
    items = [_FULL] * dim + ["new_axis"] if dim >= 0 else ["ellipsis", "new_axis"] + [_FULL] * (-dim - 1)
    return {"op": "index", "items": items}, [call.get(0, "input")]


def _squeeze(call):
    """`x.squeeze(dim)`, `x.squeeze((d0, d1))` and `x.squeeze()`: each named dimension (every
    one for `squeeze()`) is dropped where its size is 1, as PyTorch does at run time."""
    dim = call.get(1, "dim")
    if dim is None:
        return {"op": "index", "items": ["squeeze_all"]}, [call.get(0, "input")]
    dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    if any(_is_node(d) or isinstance(d, bool) or not isinstance(d, int) for d in dims):
        raise _NoOp(f"squeeze of dimensions {dim!r} (mase-rs takes ints)")
    if len(dims) == 1:
        return {"op": "index", "items": _items_at(dims[0], "squeeze")}, [call.get(0, "input")]
    if len(set(dims)) != len(dims) or any(d < 0 for d in dims) and any(d >= 0 for d in dims):
        raise _NoOp(f"squeeze of dimensions {dim!r} (distinct, all counted from the start or all from the end)")
    # Dimensions counted from the start or all from the end: one subscript covers them.
    if dims[0] >= 0:
        items = [_FULL] * (max(dims) + 1)
        for d in dims:
            items[d] = "squeeze"
    else:
        items = ["ellipsis"] + [_FULL] * (-min(dims))
        for d in dims:
            items[len(items) + d] = "squeeze"
    return {"op": "index", "items": items}, [call.get(0, "input")]


def _expand(call):
    dims, extra = _shape_args(call, 1)
    return {"op": "expand", "shape": dims}, [call.args[0], *extra]


def _repeat(call):
    dims, extra = _shape_args(call, 1)
    if extra:
        raise _NoOp("repeat with computed counts")
    return {"op": "repeat", "repeats": [d["const"] for d in dims]}, [call.args[0]]


def _stack(call):
    tensors = call.get(0, "tensors")
    if not isinstance(tensors, (tuple, list)) or not all(_is_node(t) for t in tensors):
        raise _NoOp("stack of anything but a list of tensors")
    return {"op": "stack", "dim": int(call.get(1, "dim", 0))}, list(tensors)


def _embedding(m):
    """`nn.Embedding`; `max_norm` (which rewrites the table in forward) and
    `scale_grad_by_freq` have no mase-rs op."""
    if m.max_norm is not None:
        raise _NoOp("Embedding with max_norm (it renormalises rows of the table in forward) is not supported")
    if m.scale_grad_by_freq:
        raise _NoOp("Embedding with scale_grad_by_freq is not supported")
    return {
        "op": "embedding",
        "num_embeddings": int(m.num_embeddings),
        "embedding_dim": int(m.embedding_dim),
        "padding_idx": None if m.padding_idx is None else int(m.padding_idx),
        "functional": False,
    }


def _fn_embedding(call):
    """`F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)`."""
    ids, w = call.get(0, "input"), call.get(1, "weight")
    if call.get(3, "max_norm") is not None:
        raise _NoOp("embedding with max_norm (it renormalises rows of the table in forward) is not supported")
    if call.get(5, "scale_grad_by_freq", False):
        raise _NoOp("embedding with scale_grad_by_freq is not supported")
    # The table's size comes from the weight (a `get_attr` tensor), as the trace has no shapes.
    if not _is_node(w) or w.op != "get_attr":
        raise _NoOp("embedding whose weight is not a tensor attribute (its size is unknown before a forward run)")
    num, dim = (int(d) for d in _attribute(w.graph.owning_module, w.target).shape)
    padding_idx = call.get(2, "padding_idx")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num
    op = {"op": "embedding", "num_embeddings": num, "embedding_dim": dim, "padding_idx": padding_idx, "functional": True}
    return op, [ids, w]


def _einsum(call):
    """`torch.einsum(equation, a, b)` (or with the operands as one list) of two operands; the
    graph checks the equation and names it when it is no matrix product."""
    equation, operands = call.args[0], list(call.args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    if not isinstance(equation, str):
        raise _NoOp("einsum's equation is not a string")
    if len(operands) != 2 or not all(_is_node(o) for o in operands):
        raise _NoOp(f'einsum "{equation}" of {len(operands)} operands: only products of two tensors are supported')
    return {"op": "einsum", "equation": equation}, operands


def _sdpa(call):
    """`F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)`.
    The mask must be a tensor attribute or a forward argument given in `MaseGraph(input_dtypes=...)`,
    whose dtype says whether it is a bool or an additive mask, or a value known to be bool (a
    comparison, `~` of one)."""
    q, k, v = call.get(0, "query"), call.get(1, "key"), call.get(2, "value")
    p = call.get(4, "dropout_p", 0.0)
    if p != 0.0:
        raise _NoOp(f"scaled_dot_product_attention with dropout_p = {p}: only 0 is supported")
    if call.get(7, "enable_gqa", False):
        raise _NoOp("scaled_dot_product_attention with enable_gqa = True is not supported")
    scale = call.get(6, "scale")
    op = {
        "op": "scaled_dot_product_attention",
        "mask": None,
        "is_causal": bool(call.get(5, "is_causal", False)),
        "scale": None if scale is None else float(scale),
    }
    ins = [q, k, v]
    mask = call.get(3, "attn_mask")
    if mask is not None:
        dtype = _mask_dtype(mask) if _is_node(mask) else None
        if dtype is None:
            raise _NoOp(
                "scaled_dot_product_attention's attn_mask must be a tensor attribute of the module or a forward argument "
                "given in MaseGraph(input_dtypes=...) (its dtype says bool or additive) or a comparison (a bool mask)"
            )
        import torch

        op["mask"] = "bool" if dtype == torch.bool else "additive"
        ins.append(mask)
    return op, ins


def _function_table(torch):
    """fx `call_function` target -> function of the call giving `(op, input nodes)`."""
    F = torch.nn.functional
    t = {
        operator.add: _binary("add"),
        torch.add: _binary("add"),
        operator.sub: _binary("sub"),
        torch.sub: _binary("sub"),
        operator.mul: _binary("mul"),
        torch.mul: _binary("mul"),
        operator.truediv: _binary("div"),
        torch.div: _binary("div"),
        operator.matmul: _binary("mat_mul"),
        torch.matmul: _binary("mat_mul"),
        torch.bmm: _binary("mat_mul"),
        torch.einsum: _einsum,
        F.scaled_dot_product_attention: _sdpa,
        F.embedding: _fn_embedding,
        operator.pow: _binary("pow"),
        torch.pow: _binary("pow"),
        torch.where: _where,
        torch.logical_not: _logical_not,
        operator.invert: _invert,
        torch.masked_fill: _masked_fill,
        torch.sqrt: _unary({"op": "sqrt"}),
        F.relu: _unary({"op": "relu"}),
        torch.relu: _unary({"op": "relu"}),
        F.relu6: _unary({"op": "relu6"}),
        torch.sigmoid: _unary({"op": "sigmoid"}),
        F.sigmoid: _unary({"op": "sigmoid"}),
        torch.tanh: _unary({"op": "tanh"}),
        F.tanh: _unary({"op": "tanh"}),
        F.selu: _unary({"op": "selu"}),
        torch.selu: _unary({"op": "selu"}),
        F.gelu: lambda c: ({"op": "gelu", "tanh": c.get(1, "approximate", "none") == "tanh"}, [c.get(0, "input")]),
        F.silu: _unary({"op": "silu"}),
        F.hardswish: _unary({"op": "hardswish"}),
        F.hardsigmoid: _unary({"op": "hardsigmoid"}),
        F.softplus: _softplus,
        F.mish: _unary({"op": "mish"}),
        torch.mean: _reduce("mean"),
        torch.sum: _reduce("sum"),
        torch.amax: _reduce("amax"),
        F.leaky_relu: lambda c: (
            {"op": "leaky_relu", "negative_slope": float(c.get(1, "negative_slope", 0.01))},
            [c.get(0, "input")],
        ),
        F.softmax: lambda c: ({"op": "softmax", "dim": _dim(c.get(1, "dim"), "softmax")}, [c.get(0, "input")]),
        torch.softmax: lambda c: ({"op": "softmax", "dim": _dim(c.get(1, "dim"), "softmax")}, [c.get(0, "input")]),
        F.log_softmax: lambda c: ({"op": "log_softmax", "dim": _dim(c.get(1, "dim"), "log_softmax")}, [c.get(0, "input")]),
        torch.log_softmax: lambda c: ({"op": "log_softmax", "dim": _dim(c.get(1, "dim"), "log_softmax")}, [c.get(0, "input")]),
        F.dropout: _dropout,
        torch.flatten: lambda c: _flatten(c, 0),
        torch.reshape: lambda c: _view(c),
        torch.transpose: lambda c: (
            {"op": "transpose", "dim0": int(c.get(1, "dim0")), "dim1": int(c.get(2, "dim1"))},
            [c.get(0, "input")],
        ),
        torch.permute: _permute,
        torch.cat: _cat,
        torch.concat: _cat,
        torch.clamp: _clamp,
        torch.clip: _clamp,
        F.pad: _pad,
        F.max_pool1d: _fn_pool("max", 1),
        F.max_pool2d: _fn_pool("max", 2),
        F.avg_pool1d: _fn_pool("avg", 1),
        F.avg_pool2d: _fn_pool("avg", 2),
        F.adaptive_avg_pool1d: lambda c: (_adaptive(1, c.get(1, "output_size")), [c.get(0, "input")]),
        F.adaptive_avg_pool2d: lambda c: (_adaptive(2, c.get(1, "output_size")), [c.get(0, "input")]),
        F.adaptive_max_pool1d: lambda c: (_adaptive(1, c.get(1, "output_size"), "max", c.get(2, "return_indices", False)), [c.get(0, "input")]),
        F.adaptive_max_pool2d: lambda c: (_adaptive(2, c.get(1, "output_size"), "max", c.get(2, "return_indices", False)), [c.get(0, "input")]),
        F.layer_norm: _fn_layer_norm,
        F.group_norm: _fn_group_norm,
        # Shapes and indexing.
        getattr: _getattr,
        operator.getitem: _getitem,
        operator.floordiv: _floordiv,
        torch.chunk: _split,
        torch.split: _split,
        torch.unbind: _split,
        torch.stack: _stack,
        torch.unsqueeze: _unsqueeze,
        torch.squeeze: _squeeze,
    }
    for name, fns in _COMPARISONS.items():
        for fn in fns(torch):
            t[fn] = _compare(name)
    # torchvision's `stochastic_depth(input, p, mode, training)` (fx-wrapped, so a call of its
    # own), when the model came with torchvision.
    tv_ops = sys.modules.get("torchvision.ops")
    if tv_ops is not None and hasattr(tv_ops, "stochastic_depth"):
        t[tv_ops.stochastic_depth] = _stochastic_depth
    return t


# Each comparison op and the operator and `torch` functions that trace to it.
_COMPARISONS = {
    "eq": lambda torch: (operator.eq, torch.eq),
    "ne": lambda torch: (operator.ne, torch.ne, torch.not_equal),
    "lt": lambda torch: (operator.lt, torch.lt, torch.less),
    "le": lambda torch: (operator.le, torch.le, torch.less_equal),
    "gt": lambda torch: (operator.gt, torch.gt, torch.greater),
    "ge": lambda torch: (operator.ge, torch.ge, torch.greater_equal),
}

_METHODS = {
    "relu": _unary({"op": "relu"}),
    "sigmoid": _unary({"op": "sigmoid"}),
    "tanh": _unary({"op": "tanh"}),
    "sqrt": _unary({"op": "sqrt"}),
    "softmax": lambda c: ({"op": "softmax", "dim": _dim(c.get(1, "dim"), "softmax")}, [c.args[0]]),
    "log_softmax": lambda c: ({"op": "log_softmax", "dim": _dim(c.get(1, "dim"), "log_softmax")}, [c.args[0]]),
    "flatten": lambda c: _flatten(c, 0),
    "view": _view,
    "reshape": _view,
    "permute": _permute,
    "transpose": lambda c: ({"op": "transpose", "dim0": int(c.get(1, "dim0")), "dim1": int(c.get(2, "dim1"))}, [c.args[0]]),
    "size": _size,
    "add": _binary("add"),
    "sub": _binary("sub"),
    "mul": _binary("mul"),
    "div": _binary("div"),
    "matmul": _binary("mat_mul"),
    "bmm": _binary("mat_mul"),
    "pow": _binary("pow"),
    "clamp": _clamp,
    "clip": _clamp,
    "contiguous": lambda c: (_ALIAS, [c.args[0]]),
    "mean": _reduce("mean"),
    "sum": _reduce("sum"),
    "amax": _reduce("amax"),
    # Shapes and indexing.
    "chunk": _split,
    "split": _split,
    "unbind": _split,
    "expand": _expand,
    "repeat": _repeat,
    "unsqueeze": _unsqueeze,
    "squeeze": _squeeze,
    "floor_divide": _floordiv,
    "eq": _compare("eq"),
    "ne": _compare("ne"),
    "lt": _compare("lt"),
    "le": _compare("le"),
    "gt": _compare("gt"),
    "ge": _compare("ge"),
    "masked_fill": _masked_fill,
    "logical_not": _logical_not,
}


def _module_call(gm, node, modules):
    """The op and inputs of a `call_module` node: the module's op, or, for a module the graph
    cannot lower (a user's own class, a module mase-rs has no op for), an opaque node that
    PyTorch runs, when the module is called with tensors only."""
    m = gm.get_submodule(node.target)
    make = modules.get(type(m))
    why = f"module {type(m).__name__} has no mase-rs op"
    if make is not None:
        if len(node.args) != 1 or node.kwargs:
            raise _NoOp(f"module {type(m).__name__} called with {len(node.args)} arguments")
        try:
            return make(m), [node.args[0]]
        except _NoOp as e:
            why = f"module {type(m).__name__}: {e}"
    if node.kwargs or not node.args or not all(_is_node(a) for a in node.args):
        raise _NoOp(f"{why}, and it is called with arguments other than tensors, so it cannot stay a PyTorch module")
    # A region of code kept as PyTorch's (`regions.OpaqueRegion`) says what it holds.
    return {"op": "opaque", "class": getattr(m, "opaque_class", type(m).__name__), "sample_shape": None}, list(node.args)


def _opaque_shapes(gm, records, sample_shape):
    """Fills each opaque record's `sample_shape` from a forward run of `gm` on zeros of
    `sample_shape` (batch 2; eval mode and no gradients, so nothing in the module moves)."""
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    opaque = {r["name"]: r for r in records if r["op"]["op"] == "opaque"}
    if not opaque or sample_shape is None:
        return
    modes = [(m, m.training) for m in gm.modules()]
    gm.eval()
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(torch.zeros(2, *sample_shape))
    except Exception as e:  # the user's forward may raise anything
        # PyTorch's messages (ShapeProp's) span lines; the refusal is one.
        line = " ".join(str(e).split())
        raise ValueError(f"MaseGraph: a forward run on a batch of shape {[2, *sample_shape]} failed: {type(e).__name__}: {line}") from None
    finally:
        for m, mode in modes:
            m.training = mode
    for node in gm.graph.nodes:
        name = node.meta.get("mase_name", node.name)
        if name in opaque:
            meta = node.meta.get("tensor_meta")
            if not hasattr(meta, "shape"):
                raise ValueError(f"MaseGraph: node `{name}` ({opaque[name]['op']['class']}) returns no tensor")
            opaque[name]["op"]["sample_shape"] = [int(d) for d in meta.shape[1:]]


def _user_modules_of(gm, names):
    """For the fx nodes `names`, the innermost module of each that is not a `torch.nn` class
    (the user's own) and holds no weighted module mase-rs lowers (a custom layer, such as a
    fake-quantized linear with its own forward), as module paths. Such a module stays whole;
    the code around the layers of a larger module becomes opaque regions instead, so that
    quantize still reaches those layers."""
    import torch.nn as nn

    known = _module_table(nn)

    def holds_layers(m):
        return any(type(s) in known and next(s.parameters(recurse=False), None) is not None for s in m.modules() if s is not m)

    leaves = set()
    for node in gm.graph.nodes:
        if node.name not in names:
            continue
        stack = list((node.meta.get("nn_module_stack") or {}).values())
        own = [path for path, cls in stack if not cls.__module__.startswith("torch.")]
        try:
            whole = bool(own) and not holds_layers(gm.get_submodule(own[-1]))
        except AttributeError:  # a module the stack names by a path fx does not keep
            whole = False
        if whole:
            leaves.add(own[-1])
    return leaves


def _guess_sample_shape(gm):
    """One sample's shape, from the first layer that reads the input (`Linear` or
    `BatchNorm1d`), or None."""
    import torch.nn as nn

    x = next((n for n in gm.graph.nodes if n.op == "placeholder"), None)
    for user in x.users if x is not None else ():
        if user.op == "call_module":
            m = gm.get_submodule(user.target)
            if isinstance(m, nn.Linear):
                return [m.in_features]
            if isinstance(m, nn.BatchNorm1d):
                return [m.num_features]
    return None


def _qualified(target):
    from torch.fx.node import _get_qualified_name

    name = _get_qualified_name(target)
    return "operator." + name[len("_operator.") :] if name.startswith("_operator.") else name


def trace(module, concrete_args=None, leaves=(), input_dtypes=None):
    """`module` as a `torch.fx.GraphModule` (traced as `torch.fx.symbolic_trace` does, or as
    given when it already is one). The submodules at the paths in `leaves` are kept as
    `call_module` nodes instead of being traced through. `input_dtypes` maps forward arguments
    to their dtypes (see `MaseGraph`)."""
    import torch.fx

    if isinstance(module, torch.fx.GraphModule):
        _mark_input_dtypes(module, input_dtypes)
        return module

    # Modules with a mase-rs op outside torch.nn (torchvision's StochasticDepth) stay whole too.
    known = tuple(_module_table(torch.nn))

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return qualname in leaves or type(m) in known or super().is_leaf_module(m, qualname)

    try:
        tracer = Tracer()
        graph = tracer.trace(module, concrete_args=concrete_args)
        gm = torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
    except Exception as e:  # torch.fx raises many kinds (TraceError, TypeError, ...)
        line = " ".join(str(e).split())
        raise ValueError(f"MaseGraph: torch.fx cannot trace {type(module).__name__}: {type(e).__name__}: {line}") from None
    _mark_input_dtypes(gm, input_dtypes)
    # Attention modules and functional linear layers as the ops they are made of.
    from mase_rs.ir.graph import attention, functional_linear

    attention.expand(gm)
    functional_linear.expand(gm)
    return gm


def _mark_input_dtypes(gm, input_dtypes):
    """Records on `gm`'s placeholders the dtypes `input_dtypes` gives them (`node.meta`,
    read by `_is_bool` and the attention masks); a name that is not a forward argument, or a
    dtype other than bool or a float, is an error naming it."""
    import torch

    if not input_dtypes:
        return
    if not isinstance(input_dtypes, dict):
        raise TypeError(f"MaseGraph: input_dtypes must be a dict of argument name to dtype, not {type(input_dtypes).__name__}")
    inputs = {n.target: n for n in gm.graph.nodes if n.op == "placeholder"}
    for name, dtype in input_dtypes.items():
        if name not in inputs:
            known = ", ".join(inputs) or "none"
            raise ValueError(f"MaseGraph: input_dtypes names `{name}`, which is not an argument of the traced forward (its arguments: {known})")
        if not isinstance(dtype, torch.dtype) or not (dtype == torch.bool or dtype.is_floating_point):
            raise ValueError(f"MaseGraph: input_dtypes[{name!r}] must be torch.bool or a float dtype, not {dtype!r}")
        inputs[name].meta["mase_dtype"] = dtype


def _input_dtype(n):
    """The dtype `MaseGraph(input_dtypes=...)` gave the placeholder `n` (None when not given)."""
    return n.meta.get("mase_dtype") if n.op == "placeholder" else None


def _mask_dtype(n):
    """The dtype of the mask node `n` as known at trace time: a tensor attribute's, a forward
    argument's from `input_dtypes`, bool for a value known to be bool (`_is_bool`); None
    otherwise."""
    import torch

    if n.op == "get_attr":
        return getattr(_attribute(n.graph.owning_module, n.target), "dtype", None)
    if n.op == "placeholder":
        return _input_dtype(n)
    return torch.bool if _is_bool(n) else None


def _attribute(gm, target):
    """The attribute at the dotted path `target` of `gm` (a `get_attr` node's value)."""
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _input_nodes(node):
    """The fx nodes a node reads, in argument order, repeats kept (`x + x` reads `x` twice)."""
    import torch.fx

    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) or n)
    return found


def _returned(out):
    """The values a forward returns, in order: one tensor, or the entries of a tuple or list of
    tensors (the graph's several outputs)."""
    if _is_node(out):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(_is_node(v) for v in out):
        return list(out)
    # torch.fx hands dicts and lists over as its immutable subclasses.
    kinds = {dict: "dict", list: "list", tuple: "tuple"}
    what = next((name for kind, name in kinds.items() if isinstance(out, kind)), type(out).__name__)
    if isinstance(out, (tuple, list)):
        kinds = ", ".join(sorted({type(v).__name__ for v in out if not _is_node(v)})) or "nothing"
        what = f"a {what} holding {kinds}"
    raise _NoOp(f"the forward returns {what}; mase-rs models return a tensor or a tuple or list of tensors")


# How many nodes a refusal lists by name.
_LISTED = 40


def node_records(gm, lower=None):
    """The fx nodes of `gm` as mase-rs node records, the `get_attr` targets that are
    parameters, and the number operands (`x * 2.0`) as constants: each becomes a `get_attr`
    node `<reader>_const` (not trained) before the node that reads it. Raises one `ValueError`
    listing every node without a mase-rs op.

    `lower(node, gm)`, when given, may answer a node's `(op, quant)` itself (the nodes of
    `mg.model` that were built from an op); it answers None for the others."""
    import torch
    import torch.nn as nn

    modules, functions = _module_table(nn), _function_table(torch)
    records, failures, alias, trainable, constants = [], [], {}, [], {}
    if not any(n.op == "placeholder" for n in gm.graph.nodes):
        raise ValueError("MaseGraph: forward takes no inputs; mase-rs models take at least one tensor")

    def name_of(v):
        return alias.get(v.name, v.meta.get("mase_name", v.name))

    for node in gm.graph.nodes:
        target = node.target if isinstance(node.target, str) else _qualified(node.target)
        quant = None
        try:
            known = lower(node, gm) if lower is not None else None
            if known is not None:
                (op, quant), ins = known, _input_nodes(node)
            elif node.op == "placeholder":
                op, ins = {"op": "input"}, []
            elif node.op == "output":
                op, ins = {"op": "output"}, _returned(node.args[0])
            elif node.op == "get_attr":
                value = _attribute(gm, node.target)
                if not isinstance(value, torch.Tensor):
                    raise _NoOp(f"attribute `{node.target}` is a {type(value).__name__}, not a tensor")
                if isinstance(value, nn.Parameter) and value.requires_grad:
                    trainable.append(node.target)
                op, ins = {"op": "constant"}, []
            elif node.op == "call_module":
                op, ins = _module_call(gm, node, modules)
            elif node.op == "call_function":
                make = functions.get(node.target)
                if make is None:
                    raise _NoOp("no mase-rs op")
                op, ins = make(_Call(node))
            elif node.op == "call_method":
                make = _METHODS.get(node.target)
                if make is None:
                    raise _NoOp("no mase-rs op")
                op, ins = make(_Call(node))
            else:
                raise _NoOp(f"fx op `{node.op}`")
            if not all(_is_node(i) or isinstance(i, _Scalar) for i in ins):
                raise _NoOp("an input that is not a tensor of the graph")
        except _NoOp as e:
            failures.append(f"{node.name} ({target}: {e})")
            continue
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            failures.append(f"{node.name} ({target}: arguments {node.args!r}: {e})")
            continue
        if op == _ALIAS:
            alias[node.name] = name_of(ins[0])
            continue
        names = []
        for i in ins:
            if isinstance(i, _Scalar):
                # Named after its reader, as the ONNX import names folded constants (a second
                # number of the same reader, as in `torch.where(c, 1.0, 0.0)`, gets a suffix).
                const = f"{node.name}_const"
                if const in constants:
                    const = f"{const}_1"
                constants[const] = np.array(i.value, dtype=np.float32)
                records.append({"name": const, "kind": "get_attr", "target": const, "inputs": [], "op": {"op": "constant"}})
                names.append(const)
            else:
                names.append(name_of(i))
        record = {"name": node.meta.get("mase_name", node.name), "kind": node.op, "target": target, "inputs": names, "op": op}
        if quant:
            record["quant"] = quant
        records.append(record)
    if failures:
        shown = "; ".join(failures[:_LISTED]) + (f"; and {len(failures) - _LISTED} more" if len(failures) > _LISTED else "")
        e = ValueError(f"MaseGraph: {len(failures)} torch.fx node(s) have no mase-rs op: {shown}")
        e.nodes = [f.split(" ", 1)[0] for f in failures]
        raise e
    return records, trainable, constants


def _state_arrays(gm):
    """The float tensors of `gm`'s state dict (and its `get_attr` tensors) as float32 numpy
    arrays; entries of other types (`num_batches_tracked`) are not weights mase-rs holds."""
    import torch

    out = OrderedDict()
    for k, v in gm.state_dict(keep_vars=False).items():
        if torch.is_tensor(v) and v.is_floating_point():
            out[k] = v.detach().to("cpu", torch.float32).contiguous().numpy()
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.target not in out:
            out[node.target] = _attribute(gm, node.target).detach().to("cpu", torch.float32).contiguous().numpy()
    return out


class TorchSource:
    """What a graph traced from a `torch.nn.Module` keeps of the module: the fx `GraphModule`
    (whose submodules are the user's), the state-dict entries mase-rs does not hold (in the
    module's key order), and how many batches each batch norm has seen (`num_batches_tracked`)."""

    def __init__(self, gm, keys, extra, bn_batches, detached=False, opaque=False):
        self.gm, self.keys, self.extra, self.bn_batches = gm, keys, extra, bn_batches
        # A copy's view builds its own modules instead of sharing the user's.
        self.detached = detached
        # Whether the graph holds PyTorch code (modules kept whole, regions), which no view can
        # build from the graph.
        self.opaque = opaque

    def copy(self):
        from mase_rs.ir.graph import regions

        extra = {k: v.clone() for k, v in self.extra.items()}
        if self.opaque:
            # The copy runs its own copy of the PyTorch code (and of the user's modules).
            import copy

            gm = copy.deepcopy(self.gm)
            regions.set_roots(gm)
            return TorchSource(gm, list(self.keys), extra, dict(self.bn_batches), opaque=True)
        return TorchSource(self.gm, list(self.keys), extra, dict(self.bn_batches), detached=True)

    def batches_run(self, n):
        """Records `n` batches run in train mode (batch norm counts them)."""
        for k in self.bn_batches:
            self.bn_batches[k] += n

    def state_dict(self, native_state):
        """The module's state dict with mase-rs's weights, as torch tensors."""
        import torch

        out = OrderedDict()
        for k in self.keys:
            if k in native_state:
                out[k] = torch.from_numpy(native_state[k])
            elif k in self.bn_batches:
                out[k] = torch.tensor(self.bn_batches[k], dtype=torch.int64)
            else:
                out[k] = self.extra[k].clone()
        return out

    def split(self, state):
        """Takes the entries of a state dict mase-rs does not hold (copying them into the
        PyTorch modules that use them: modules kept whole, opaque regions); returns the others."""
        import torch

        rest = {}
        live = self.gm.state_dict(keep_vars=True) if self.opaque else {}
        for k, v in state.items():
            if k in self.bn_batches:
                self.bn_batches[k] = int(v)
            elif k in self.extra:
                self.extra[k] = v.detach().clone() if hasattr(v, "detach") else v
                if k in live:
                    value = v if torch.is_tensor(v) else torch.as_tensor(np.asarray(v))
                    if tuple(value.shape) != tuple(live[k].shape):
                        raise ValueError(f"load_state_dict: `{k}` has shape {list(value.shape)}; the module's is {list(live[k].shape)}")
                    with torch.no_grad():
                        live[k].copy_(value)
            else:
                rest[k] = v
        return rest


# One module per op made on the meta device (no initial weights drawn); `module_from_op` copies
# it, which is much cheaper than running a module's constructor.
_PROTOTYPES = {}


def _fresh(op, make):
    """A new module for `op` whose tensors are still to be given (on the meta device)."""
    import torch

    key = json.dumps(op, sort_keys=True)
    proto = _PROTOTYPES.get(key)
    if proto is None:
        with torch.device("meta"):
            proto = _PROTOTYPES[key] = make()
    m = proto.__class__.__new__(proto.__class__)
    # Every container (parameters, buffers, hooks, ...) is the new module's own.
    m.__dict__.update({k: (v.copy() if isinstance(v, dict) else v) for k, v in proto.__dict__.items()})
    return m


def _stochastic_depth_module(op):
    from mase_rs.nn.stochastic_depth import StochasticDepth

    return StochasticDepth(op["p"], op["mode"])


def _embedding_module(op):
    from mase_rs.nn.embedding import Embedding

    return Embedding(op["num_embeddings"], op["embedding_dim"], op.get("padding_idx"))


def module_from_op(op, weights):
    """A new `torch.nn` module for a mase-rs module op (`{"op": "linear", ...}`, as
    `node.module` holds it) with `weights` (its own state-dict entries, `weight`, `bias`, ...).

    >>> import numpy as np
    >>> m = module_from_op({"op": "linear", "in_features": 2, "out_features": 1, "bias": False},
    ...                    {"weight": np.ones((1, 2), np.float32)})
    >>> m, m.weight.tolist()
    (Linear(in_features=2, out_features=1, bias=False), [[1.0, 1.0]])
    """
    import torch
    import torch.nn as nn

    kind = op["op"]

    def conv(cls):
        return cls(
            op["in_channels"],
            op["out_channels"],
            op["kernel"],
            op["stride"],
            op["padding"],
            op["dilation"],
            op["groups"],
            op["bias"],
        )

    def pool(cls, **kw):
        if op.get("ceil_mode"):
            kw["ceil_mode"] = True
        return cls(op["kernel"], op["stride"], op["padding"], **kw)

    def avg_pool(cls):
        return pool(cls, **({} if op.get("count_include_pad", True) else {"count_include_pad": False}))

    # `bias=False` only where it is false: older PyTorch has no `bias` argument on these.
    no_bias = {} if op.get("bias", True) else {"bias": False}

    makers = {
        "linear": lambda: nn.Linear(op["in_features"], op["out_features"], op["bias"]),
        "conv1d": lambda: conv(nn.Conv1d),
        "conv2d": lambda: conv(nn.Conv2d),
        "batch_norm1d": lambda: nn.BatchNorm1d(op["num_features"], op["eps"], op["momentum"], op["affine"]),
        "batch_norm2d": lambda: nn.BatchNorm2d(op["num_features"], op["eps"], op["momentum"], op["affine"]),
        "relu": nn.ReLU,
        "relu6": nn.ReLU6,
        "leaky_relu": lambda: nn.LeakyReLU(op["negative_slope"]),
        "sigmoid": nn.Sigmoid,
        "tanh": nn.Tanh,
        "selu": nn.SELU,
        "gelu": lambda: nn.GELU("tanh" if op["tanh"] else "none"),
        "silu": nn.SiLU,
        "hardswish": nn.Hardswish,
        "hardsigmoid": nn.Hardsigmoid,
        "softplus": lambda: nn.Softplus(op["beta"], op["threshold"]),
        "mish": nn.Mish,
        "softmax": lambda: nn.Softmax(op["dim"]),
        "log_softmax": lambda: nn.LogSoftmax(op["dim"]),
        "max_pool1d": lambda: pool(nn.MaxPool1d),
        "max_pool2d": lambda: pool(nn.MaxPool2d),
        "avg_pool1d": lambda: avg_pool(nn.AvgPool1d),
        "avg_pool2d": lambda: avg_pool(nn.AvgPool2d),
        "adaptive_avg_pool1d": lambda: nn.AdaptiveAvgPool1d(op["output_size"]),
        "adaptive_avg_pool2d": lambda: nn.AdaptiveAvgPool2d(tuple(op["output_size"])),
        "flatten": lambda: nn.Flatten(op["start_dim"], op["end_dim"]),
        "dropout": lambda: nn.Dropout(op["p"]),
        "adaptive_max_pool1d": lambda: nn.AdaptiveMaxPool1d(op["output_size"]),
        "adaptive_max_pool2d": lambda: nn.AdaptiveMaxPool2d(tuple(op["output_size"])),
        "layer_norm": lambda: nn.LayerNorm(op["normalized_shape"], op["eps"], op["elementwise_affine"], **no_bias),
        "group_norm": lambda: nn.GroupNorm(op["num_groups"], op["num_channels"], op["eps"], op["affine"], **no_bias),
        "stochastic_depth": lambda: _stochastic_depth_module(op),
        "embedding": lambda: _embedding_module(op),
    }
    if kind not in makers:
        raise ValueError(f"module_from_op: mase-rs op `{kind}` is not a torch.nn module")
    m = _fresh(op, makers[kind])
    for name, value in weights.items():
        t = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
        if name in m._parameters:
            m._parameters[name] = nn.Parameter(t, requires_grad=m._parameters[name].requires_grad)
        elif name in m._buffers:
            m._buffers[name] = t
        else:
            raise ValueError(f"module_from_op: {type(m).__name__} has no tensor `{name}`")
    if getattr(m, "num_batches_tracked", None) is not None:
        m._buffers["num_batches_tracked"] = torch.zeros((), dtype=torch.long)
    missing = [n for n, t in [*m.named_parameters(), *m.named_buffers()] if t.is_meta]
    if missing:
        raise ValueError(f"module_from_op: no values for {type(m).__name__}'s {', '.join(missing)}")
    return m


def _float_ids(gm):
    """The graph's values are floats, ids included: each `nn.Embedding` of the traced module
    becomes `mase_rs.nn.Embedding` (the same object, whose forward also takes whole-number float
    ids and checks them), so that `mg.model` runs it in PyTorch on the graph's values."""
    import torch.nn as nn

    from mase_rs.nn.embedding import Embedding

    for m in gm.modules():
        if type(m) is nn.Embedding:
            m.__class__ = Embedding


def from_module(module, sample_shape=None, concrete_args=None, input_dtypes=None):
    """Traces `module` and builds its mase-rs graph: returns `(NativeGraph, TorchSource)`.

    `sample_shape` (one sample's shape, without the batch), when given, checks the shapes of
    every node now; otherwise the first forward does. `input_dtypes`: see `MaseGraph`."""
    gm = trace(module, concrete_args, input_dtypes=input_dtypes)
    _float_ids(gm)
    try:
        records, trainable, constants = node_records(gm)
    except ValueError as e:
        records = None
        failed = getattr(e, "nodes", None)
        if failed is None:
            raise
        # Nodes inside a user's own layer that mase-rs cannot lower: that layer stays whole.
        leaves = _user_modules_of(gm, failed)
        if leaves:
            gm = trace(module, concrete_args, leaves, input_dtypes)
            try:
                records, trainable, constants = node_records(gm)
            except ValueError as again:
                e, failed = again, getattr(again, "nodes", [])
        if records is None:
            # The rest of the code mase-rs has no op for stays PyTorch's, as opaque regions.
            from mase_rs.ir.graph import regions

            shape = sample_shape if sample_shape is not None else _guess_sample_shape(gm)
            try:
                regions.carve(gm, set(failed), shape, set(module.state_dict(keep_vars=True)))
            except ValueError as why:
                inputs = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
                hint = ""
                if len(inputs) > 1:
                    hint = (
                        f"; the forward takes several tensors ({', '.join(inputs)}): an attention mask among them loads as "
                        "ops given its dtype, MaseGraph(input_dtypes={name: torch.bool})"
                    )
                raise ValueError(f"{e}; {why}{hint}") from None
            records, trainable, constants = node_records(gm)
    _opaque_shapes(gm, records, sample_shape if sample_shape is not None else _guess_sample_shape(gm))
    state = _state_arrays(gm)
    clash = sorted(set(constants) & set(state))
    if clash:
        raise ValueError(f"MaseGraph: the module has attributes named like mase-rs's constants: {', '.join(clash)}")
    state.update(constants)
    label = type(module).__name__
    native = _native.NativeGraph.from_traced(
        label,
        json.dumps({"nodes": records, "trainable_constants": trainable}),
        dict(state),
        None if sample_shape is None else [int(d) for d in sample_shape],
    )
    held = set(native.state_dict())
    # The module's own state dict: fx leaves out modules the forward never calls, which
    # `module.load_state_dict` still expects.
    full = module.state_dict()
    keys = list(full)
    bn_batches = {
        k: int(v)
        for k, v in full.items()
        if k.endswith(".num_batches_tracked") and k[: -len(".num_batches_tracked")] + ".running_mean" in held
    }
    extra = {k: v.detach().clone() for k, v in full.items() if k not in held and k not in bn_batches}
    opaque = any(r["op"]["op"] == "opaque" for r in records)
    return native, TorchSource(gm, keys, extra, bn_batches, opaque=opaque)


__all__ = ["TorchSource", "from_module", "module_from_op", "node_records", "trace"]
