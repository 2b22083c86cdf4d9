"""Quantized functions: what a quantized `call_function` node of `mg.model` calls. Each is
named as MASE names its quantized functions (`add_integer`, `relu_minifloat_ieee`, ...) and
runs the float function of the op on the quantized operands; the node's formats and the
float function's other arguments are keyword arguments.

>>> import torch
>>> f = quantized_function("relu", "integer", torch.relu)
>>> f.__name__
'relu_integer'
"""

from mase_rs.nn.quantized.modules import qz

_FUNCTIONS = {}


def _run(fn, inputs, quant, fn_args, fn_kwargs):
    if quant.get("bypass"):
        return fn(*inputs, *fn_args, **(fn_kwargs or {}))
    ins = list(quant.get("data_in") or [])
    xs = [qz(x, ins[i] if i < len(ins) else None) for i, x in enumerate(inputs)]
    # MASE's quantized matmul/bmm read their second operand with the weight's format.
    if len(xs) > 1 and quant.get("weight") and (len(ins) < 2 or ins[1] is None):
        xs[1] = qz(xs[1], quant["weight"])
    return qz(fn(*xs, *fn_args, **(fn_kwargs or {})), quant.get("data_out"))


def quantized_function(op, fmt_name, fn):
    """The quantized version of `fn` (the float function of mase op `op`) named for the format
    `fmt_name`, made once."""
    key = (op, fmt_name, fn)
    if key not in _FUNCTIONS:

        def f(*inputs, quant, fn_args=(), fn_kwargs=None):
            return _run(fn, inputs, quant, fn_args, fn_kwargs)

        f.__name__ = f.__qualname__ = f"{op}_{fmt_name}"
        f.__module__ = __name__
        _FUNCTIONS[key] = f
    return _FUNCTIONS[key]
