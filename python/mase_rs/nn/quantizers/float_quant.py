"""QONNX `FloatQuant` (the quant crate's `float_quant.rs`), as its reference implementation computes
it: `X = x / scale`, `es = max(floor(log2(|X| + tiny)) - M, 1 - bias - M)`,
`xq = 2^es * round(X / 2^es)` clamped to `±min((2 - 2^-M) 2^(2^E - 1 - bias), max_val)`; not
saturating, values beyond become ±inf (`has_inf`) or NaN (`has_nan`); `out = xq * scale`.
Subnormals are always produced (`has_subnormal` only informs back ends). NaN stays NaN and ±inf
give NaN."""

import torch

from ._bits import no_nan, MIN_POSITIVE, ROUNDING, exp2i, f32, floor_log2
from ._fields import check_broadcast, check_param, param_error, read
from ._qonnx import integer_in
from ._qonnx import param

NAME = "float_quant"
FIELDS = {
    "scale": "tensor",
    "exponent_bitwidth": "f32",
    "mantissa_bitwidth": "f32",
    "exponent_bias": "f32",
    "max_val": "f32",
    "has_inf": "bool",
    "has_nan": "bool",
    "has_subnormal": "bool",
    "saturation": "bool",
    "rounding_mode": "rounding",
}


def validate(fmt):
    f = read(fmt, "float_quant", FIELDS)
    name = "float_quant"
    if not integer_in(f.exponent_bitwidth, 1, 8):
        raise param_error(name, "exponent_bitwidth", f.exponent_bitwidth, "must be an integer between 1 and 8")
    if not integer_in(f.mantissa_bitwidth, 0, 23):
        raise param_error(name, "mantissa_bitwidth", f.mantissa_bitwidth, "must be an integer between 0 and 23")
    if not integer_in(f.exponent_bias, -float("inf"), float("inf")):
        raise param_error(name, "exponent_bias", f.exponent_bias, "must be an integer")
    e, m, b = int(f.exponent_bitwidth), int(f.mantissa_bitwidth), int(f.exponent_bias)
    if (1 << e) - 1 - b > 127 or 1 - b - m < -149:
        raise param_error(name, "exponent_bias", f.exponent_bias, "puts the format's range outside what an f32 holds (exponents -149 to 127)")
    if not (abs(f.max_val) != float("inf") and f.max_val > 0):
        raise param_error(name, "max_val", f.max_val, "must be finite and positive")
    if not f.saturation and not f.has_inf and not f.has_nan:
        raise param_error(name, "saturation", False, "a non-saturating format needs `has_inf` or `has_nan` for out-of-range values")
    check_param(name, "scale", f.scale, True)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    check_broadcast("float_quant", "scale", f.scale, x.shape)
    e, m, b = int(f.exponent_bitwidth), int(f.mantissa_bitwidth), int(f.exponent_bias)
    computed = (2.0 - 2.0 ** (-m)) * 2.0 ** ((1 << e) - 1 - b)
    mx = f32(min(computed, f.max_val))
    s = param(f.scale, x)
    v = x / s
    es = (floor_log2(no_nan(v.abs()) + MIN_POSITIVE) - m).clamp(min=1 - b - m)
    scale = exp2i(es)
    xq = scale * ROUNDING[f.rounding_mode](v / scale)
    inf = torch.isinf(xq)
    p, n = xq > mx, xq < -mx
    xq = torch.where(p, mx, torch.where(n, -mx, xq))
    if not f.saturation:
        if f.has_inf:
            xq = torch.where(p, float("inf"), torch.where(n, -float("inf"), xq))
        elif f.has_nan:
            xq = torch.where(p | n | inf, float("nan"), xq)
    xq = torch.where(torch.isnan(v), v, xq)
    return xq * s
