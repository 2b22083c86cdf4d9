"""PyTorch implementations of the graph's function ops: what a `call_function` or
`call_method` node of `mg.model` calls for each mase-rs op, with the op's attributes as
arguments. `call_module` ops (linear, conv, batch norm, ...) are `torch.nn` modules
(`mase_rs.ir.graph.torch_fx.module_from_op`).

`implementation(op)` answers `(kind, target, args, kwargs)`: the fx node kind, its target and
the arguments after the node's inputs. `inputs` holds the fx nodes of the op's inputs.

>>> import torch
>>> kind, target, args, kwargs = implementation({"op": "softmax", "dim": 1}, ["x"])
>>> kind, target.__name__, args, kwargs
('call_function', 'softmax', ('x', 1), {})
"""

import operator

import numpy as np

import torch
import torch.nn.functional as F


def _window(op, key, dims):
    v = op[key]
    return tuple(v) if isinstance(v, list) else (v,) * dims


def _shape(op, inputs):
    """`view`'s target shape: constants, and `x.size(d)` nodes read as the op's extra inputs."""
    return tuple(d["const"] if "const" in d else inputs[d["input"]] for d in op["shape"])


def _f32(v):
    """A float attribute as the float32 mase-rs holds (its extremes, such as an open clamp side
    or a max-pool's padding value, read as float64 fall just outside float32's range)."""
    return float(np.float32(v))


def _open(v):
    """A clamp bound: mase-rs writes an open side as float32's extreme (which lets infinities
    through), PyTorch as None."""
    v = _f32(v)
    return None if abs(v) == float(np.finfo(np.float32).max) else v


def _pad(op):
    # F.pad lists (begin, end) pairs from the last dimension backwards.
    pairs = list(zip(op["begin"], op["end"]))[::-1]
    return [p for pair in pairs for p in pair]


def _pool(fn, op, inputs, dims, avg):
    """`F.{max,avg}_poolNd` of `op`'s window, with `ceil_mode` and `count_include_pad` (absent
    from the op at PyTorch's defaults)."""
    window = tuple(_window(op, k, dims) for k in ("kernel", "stride", "padding"))
    kwargs = {"ceil_mode": bool(op.get("ceil_mode", False))}
    if avg:
        kwargs["count_include_pad"] = bool(op.get("count_include_pad", True))
    return fn, (inputs[0], *window), kwargs


def _affine(inputs):
    """The weight and bias inputs of a layer or group norm called as a function (None when absent)."""
    return (inputs[1] if len(inputs) > 1 else None), (inputs[2] if len(inputs) > 2 else None)


def _subscript(items, shape):
    """The Python subscript of mase-rs index items for a tensor of `shape` (a `chunk` piece is
    the slice PyTorch's `chunk` would cut)."""
    consumed = sum(1 for i in items if i not in ("new_axis", "ellipsis", "squeeze_all"))
    out, d = [], 0
    for item in items:
        if item == "new_axis":
            out.append(None)
        elif item == "ellipsis":
            out.append(Ellipsis)
            d += len(shape) - consumed
        elif item == "squeeze_all":
            for _ in range(len(shape) - consumed):
                out.append(0 if int(shape[d]) == 1 else slice(None))
                d += 1
        elif item == "squeeze":
            out.append(0 if int(shape[d]) == 1 else slice(None))
            d += 1
        elif "select" in item:
            out.append(item["select"])
            d += 1
        elif "slice" in item:
            v = item["slice"]
            out.append(slice(v["start"], v["end"], v["step"]))
            d += 1
        elif "split" in item:
            size, k, n = item["split"]["size"], item["split"]["index"], int(shape[d])
            if size == 0 and n != 0:
                raise ValueError(f"split(0) of dimension {d} with size {n}: a size of 0 only splits an empty dimension")
            pieces = 1 if size == 0 else max(-(-n // size), 1)
            if k >= pieces:
                raise IndexError(f"split({size}) of dimension {d} with size {n} gives {pieces} pieces; there is no piece {k}")
            out.append(slice(k * size, (k + 1) * size))
            d += 1
        elif "sections" in item:
            sizes, k, n = item["sections"]["sizes"], item["sections"]["index"], int(shape[d])
            if sum(sizes) != n:
                raise ValueError(f"split sizes {sizes} must add up to the size {n} of dimension {d}")
            if k >= len(sizes):
                raise IndexError(f"split into {len(sizes)} pieces has no piece {k}")
            out.append(slice(sum(sizes[:k]), sum(sizes[: k + 1])))
            d += 1
        else:
            chunks, k = item["chunk"]["chunks"], item["chunk"]["index"]
            piece = max(-(-int(shape[d]) // chunks), 1)
            if k * piece >= int(shape[d]) and not (k == 0 and int(shape[d]) == 0):
                raise IndexError(f"chunk({chunks}) of a dimension of size {int(shape[d])} has no piece {k}")
            out.append(slice(k * piece, (k + 1) * piece))
            d += 1
    return tuple(out)


def index(x, items):
    """`x[items]` for mase-rs index items (`Op::Index`)."""
    return x[_subscript(items, x.shape)]


_SIZE_ARITH = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floor_div": operator.floordiv}


def scaled_dot_product_attention(q, k, v, mask=None, mask_kind=None, is_causal=False, scale=None):
    """`F.scaled_dot_product_attention` with mase-rs's mask: a bool mask is held as 0.0 / 1.0."""
    if mask is not None and mask_kind == "bool":
        mask = mask != 0
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)


_COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


def compare(a, b, kind):
    """The comparison `kind` (`"eq"`, `"lt"`, ...) as the graph holds it: 1.0 where it holds, 0.0
    elsewhere, in the operands' float type (PyTorch's bool result, as a number).

    >>> compare(torch.tensor([1.0, 2.0, float("nan")]), torch.tensor(2.0), "lt")
    tensor([1., 0., 0.])
    """
    return _COMPARE[kind](a, b).to(torch.result_type(a, b))


def where(condition, a, b):
    """`torch.where` of a condition held as numbers: `a` where it is not 0 (NaN counts as true,
    as PyTorch's cast to bool), `b` elsewhere; a bool condition is used as it is.

    >>> where(torch.tensor([1.0, 0.0]), torch.tensor(5.0), torch.tensor([7.0, 8.0]))
    tensor([5., 8.])
    """
    return torch.where(condition if condition.dtype == torch.bool else condition != 0, a, b)


def embedding(ids, weight, padding_idx=None):
    """`F.embedding` of ids held as floats (mase-rs's graph values): each must be a whole number
    in `0..num_embeddings`, which is checked rather than truncated."""
    from mase_rs.nn.embedding import as_indices

    return F.embedding(as_indices(ids, weight.shape[0]), weight, padding_idx)


def implementation(op, inputs):
    """`(kind, target, args, kwargs)` of the fx node that runs `op` (an IR op as JSON) on the fx
    nodes `inputs`. Raises `ValueError` for an op that only a module can run."""
    name = op["op"]
    x = inputs[0] if inputs else None
    unary = {
        "relu": torch.relu,
        "relu6": F.relu6,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "selu": torch.selu,
        "sqrt": torch.sqrt,
        "silu": F.silu,
        "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid,
        "mish": F.mish,
    }
    binary = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "pow": operator.pow,
        "mat_mul": torch.matmul,
    }
    if name in unary:
        return "call_function", unary[name], (x,), {}
    if name in binary:
        return "call_function", binary[name], tuple(inputs[:2]), {}
    if name in _COMPARE:
        return "call_function", compare, (*inputs[:2], name), {}
    if name == "where":
        return "call_function", where, tuple(inputs[:3]), {}
    table = {
        "leaky_relu": lambda: (F.leaky_relu, (x, op["negative_slope"])),
        "gelu": lambda: (F.gelu, (x,), {"approximate": "tanh" if op["tanh"] else "none"}),
        "softplus": lambda: (F.softplus, (x, _f32(op["beta"]), _f32(op["threshold"]))),
        # No dims reduce every element (`dim=None`).
        "mean": lambda: (torch.mean, (x, tuple(op["dims"]) or None, op["keepdim"])),
        "sum": lambda: (torch.sum, (x, tuple(op["dims"]) or None, op["keepdim"])),
        "amax": lambda: (torch.amax, (x, tuple(op["dims"]), op["keepdim"])),
        "softmax": lambda: (torch.softmax, (x, op["dim"])),
        "log_softmax": lambda: (torch.log_softmax, (x, op["dim"])),
        "max_pool1d": lambda: _pool(F.max_pool1d, op, inputs, 1, False),
        "max_pool2d": lambda: _pool(F.max_pool2d, op, inputs, 2, False),
        "avg_pool1d": lambda: _pool(F.avg_pool1d, op, inputs, 1, True),
        "avg_pool2d": lambda: _pool(F.avg_pool2d, op, inputs, 2, True),
        "adaptive_avg_pool1d": lambda: (F.adaptive_avg_pool1d, (x, op["output_size"])),
        "adaptive_avg_pool2d": lambda: (F.adaptive_avg_pool2d, (x, tuple(op["output_size"]))),
        "flatten": lambda: (torch.flatten, (x, op["start_dim"], op["end_dim"])),
        "reshape": lambda: (torch.reshape, (x, _shape(op, inputs))),
        "transpose": lambda: (torch.transpose, (x, op["dim0"], op["dim1"])),
        "permute": lambda: (torch.permute, (x, tuple(op["dims"]))),
        "clip": lambda: (torch.clamp, (x, _open(op["min"]), _open(op["max"]))),
        "concat": lambda: (torch.cat, (list(inputs), op["dim"])),
        "pad": lambda: (F.pad, (x, _pad(op), "constant", _f32(op["value"]))),
        "adaptive_max_pool1d": lambda: (F.adaptive_max_pool1d, (x, op["output_size"])),
        "adaptive_max_pool2d": lambda: (F.adaptive_max_pool2d, (x, tuple(op["output_size"]))),
        "layer_norm": lambda: (F.layer_norm, (x, tuple(op["normalized_shape"]), *_affine(inputs), _f32(op["eps"]))),
        "group_norm": lambda: (F.group_norm, (x, op["num_groups"], *_affine(inputs), _f32(op["eps"]))),
        "index": lambda: (index, (x, op["items"])),
        "stack": lambda: (torch.stack, (list(inputs), op["dim"])),
        "einsum": lambda: (torch.einsum, (op["equation"], *inputs[:2])),
        "scaled_dot_product_attention": lambda: (
            scaled_dot_product_attention,
            tuple(inputs[:4]),
            {"mask_kind": op.get("mask"), "is_causal": bool(op.get("is_causal", False)), "scale": op.get("scale")},
        ),
        "embedding": lambda: (embedding, (x, inputs[1], op.get("padding_idx"))),
    }
    if name == "size":
        return "call_method", "size", (x, op["dim"]), {}
    if name == "size_arith":
        a, b = (d["const"] if "const" in d else inputs[d["input"]] for d in op["args"])
        return "call_function", _SIZE_ARITH[op["arith"]], (a, b), {}
    if name in ("expand", "repeat"):
        sizes = _shape(op, inputs) if name == "expand" else tuple(op["repeats"])
        return "call_method", name, (x, *sizes), {}
    if name not in table:
        raise ValueError(f"mase-rs op `{name}` has no PyTorch function; it runs as a module")
    target, args, *kwargs = table[name]()
    return "call_function", target, tuple(args), (kwargs[0] if kwargs else {})
