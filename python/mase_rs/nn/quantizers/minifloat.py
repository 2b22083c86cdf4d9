"""`minifloat_denorm` and `minifloat_ieee` (the quant crate's `minifloat_denorm.rs` and
`minifloat_ieee.rs`).

Denorm: `e = clamp(ceil(log2(|x| + 1e-9)), -B, 2^E - 1 - B)`,
`mi = clamp(round(|x| / 2^e * 2^M), 0, 2^M - 1)`, `out = sign(x + 1e-9) * 2^e * mi / 2^M`.
IEEE: `e = clamp(floor(log2(|x| + 1e-9)), ...)`, an implicit leading bit for `e != -B` and
subnormals at `e = -B`. Both pass `|x| <= 1e-8` through as MASE computes it (-0.0 becomes +0.0);
NaN and ±inf give NaN."""

import torch

from ._bits import no_nan, ceil_log2, clamp_nan, exp2i, exponent_range, f32, floor_log2, sign, zero_passthrough
from ._fields import check_bias, param_error, read

FIELDS = {"width": "u32", "exponent_width": "u32", "exponent_bias": "opt_i32"}


def validate_mini(name, width, exponent_width, bias):
    """The checks shared by both minifloats and block minifloat."""
    if not 2 <= width <= 32:
        raise param_error(name, "width", width, "must be between 2 and 32")
    if not 1 <= exponent_width <= 8:
        raise param_error(name, "exponent_width", exponent_width, "must be between 1 and 8 (an f32 carrier has 8 exponent bits)")
    if exponent_width >= width:
        raise param_error(name, "exponent_width", exponent_width, f"must be smaller than `width` = {width} (one bit is the sign)")
    check_bias(name, bias)


def _validate(fmt, name):
    f = read(fmt, name, FIELDS)
    validate_mini(name, f.width, f.exponent_width, f.exponent_bias)
    return f


def _nonfinite_nan(x, q):
    # NaN stays NaN; MASE's zero passthrough multiplies ±inf by 0.
    return torch.where(torch.isfinite(x), q, torch.full_like(q, float("nan")))


def denorm(x, fmt, *, generator=None):
    f = _validate(fmt, "minifloat_denorm")
    m = f.width - f.exponent_width - 1
    e_min, e_max = exponent_range(f.exponent_width, f.exponent_bias)
    shift = f32(2.0**m)
    s = sign(x + f32(1e-9))
    a = x.abs()
    e = ceil_log2(no_nan(a) + f32(1e-9)).clamp(e_min, e_max)
    p = exp2i(e)
    mi = clamp_nan(torch.round(a / p * shift), 0.0, f32(shift - 1.0))
    q = zero_passthrough(x, s * p * (mi / shift))
    return _nonfinite_nan(x, q)


def ieee_one(x, e_min, e_max, shift):
    """One value with mantissa steps `shift = 2^M` and exponent range `[e_min, e_max]` (ints or
    int32 tensors broadcasting with `x`); shared with block minifloat."""
    s = sign(x + f32(1e-9))
    a = x.abs()
    e = torch.maximum(torch.minimum(floor_log2(no_nan(a) + f32(1e-9)), _t(e_max, x)), _t(e_min, x))
    p = exp2i(e)
    m = a / p
    normal = 1.0 + clamp_nan(torch.round(m * shift - shift), 0.0, f32(shift - 1.0)) / shift
    sub = clamp_nan(torch.round(m * shift / 2.0), 0.0, f32(shift - 1.0)) / shift * 2.0
    mant = torch.where(e != _t(e_min, x), normal, sub)
    q = zero_passthrough(x, s * p * mant)
    return _nonfinite_nan(x, q)


def _t(v, x):
    return v if torch.is_tensor(v) else torch.tensor(v, dtype=torch.int32, device=x.device)


def ieee(x, fmt, *, generator=None):
    f = _validate(fmt, "minifloat_ieee")
    m = f.width - f.exponent_width - 1
    e_min, e_max = exponent_range(f.exponent_width, f.exponent_bias)
    return ieee_one(x, e_min, e_max, f32(2.0**m))
