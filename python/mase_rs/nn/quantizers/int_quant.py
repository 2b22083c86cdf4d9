"""QONNX `IntQuant` (the quant crate's `int_quant.rs`), as its reference implementation computes it:
`y = clamp(x / scale + zero_point, min_int, max_int)`, rounded with the rounding mode,
`out = (y - zero_point) * scale`; a signed 1-bit IntQuant is bipolar (`y >= 0 ? 1 : -1`). NaN stays
NaN, ±inf saturate."""

import torch

from ._bits import ROUNDING, f32
from ._fields import check_broadcast, check_param, param_error, read
from ._qonnx import integer_in
from ._qonnx import param

NAME = "int_quant"
FIELDS = {"scale": "tensor", "zero_point": "tensor", "bit_width": "f32", "signed": "bool", "narrow": "bool", "rounding_mode": "rounding"}


def validate(fmt):
    f = read(fmt, "int_quant", FIELDS)
    if not integer_in(f.bit_width, 1, 32):
        raise param_error("int_quant", "bit_width", f.bit_width, "must be an integer between 1 and 32")
    check_param("int_quant", "scale", f.scale, True)
    check_param("int_quant", "zero_point", f.zero_point, False)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    check_broadcast("int_quant", "scale", f.scale, x.shape)
    check_broadcast("int_quant", "zero_point", f.zero_point, x.shape)
    b = int(f.bit_width)
    if f.signed:
        lo, hi = -(2 ** (b - 1)) + int(f.narrow), 2 ** (b - 1) - 1
    else:
        lo, hi = 0, 2**b - 1 - int(f.narrow)
    lo, hi = f32(lo), f32(hi)
    s, z = param(f.scale, x), param(f.zero_point, x)
    y = x / s + z
    if b == 1 and f.signed:
        one = torch.ones_like(y)
        y = torch.where(y >= 0, one, -one)
    else:
        y = torch.where(y > hi, hi, y)
        y = torch.where(y < lo, lo, y)
        y = ROUNDING[f.rounding_mode](y)
    return (y - z) * s


