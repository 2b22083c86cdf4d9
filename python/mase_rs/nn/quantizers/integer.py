"""`integer`: signed or unsigned fixed point (the quant crate's `integer.rs`).

`out = clamp(round_half_even(x * 2^frac), lo, hi) / 2^frac` with `lo, hi` = `-2^(w-1), 2^(w-1) - 1`
(signed) or `0, 2^w - 1` (unsigned), bounds taken in float32. NaN stays NaN; ±inf saturate."""

import torch

from ._bits import clamp_nan, exp2i, f32
from ._fields import param_error, read

NAME = "integer"
FIELDS = {"width": "u32", "frac_width": "i32", "signed": "bool"}


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    if not 1 <= f.width <= 32:
        raise param_error(NAME, "width", f.width, "must be between 1 and 32")
    if f.frac_width > 64:
        raise param_error(NAME, "frac_width", f.frac_width, "must be at most 64")
    if f.frac_width < -64:
        raise param_error(NAME, "frac_width", f.frac_width, "must be at least -64")
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    lo, hi = (-(2 ** (f.width - 1)), 2 ** (f.width - 1) - 1) if f.signed else (0, 2**f.width - 1)
    lo, hi = f32(lo), f32(hi)
    frac = torch.tensor(f.frac_width, dtype=torch.int32)
    s, inv = exp2i(frac).item(), exp2i(-frac).item()
    # Multiplying by the exact inverse of a power of two is the same as dividing by it.
    return clamp_nan(torch.round(x * s), lo, hi) * inv
