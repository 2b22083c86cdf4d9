"""`log`: base-2 logarithmic format `±2^e` (the quant crate's `log.rs`).

`out = sign(x + t) * 2^clamp(round(log2(|x| + t)), -B, 2^(w-1) - 1 - B)` with `t = 0.1 * 2^-B`.
Zero maps to `2^e_min`; NaN stays NaN; ±inf saturate to `±2^e_max`."""

import torch

from ._bits import no_nan, exp2i, exponent_range, f32, round_log2, sign
from ._fields import check_bias, param_error, read

NAME = "log"
FIELDS = {"width": "u32", "exponent_bias": "opt_i32"}


def validate_width(name, width):
    if not 2 <= width <= 9:
        raise param_error(name, "width", width, "must be between 2 and 9 (a sign bit and 1 to 8 exponent bits)")


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    validate_width(NAME, f.width)
    check_bias(NAME, f.exponent_bias)
    return f


def log_one(x, t, e_min, e_max):
    """One value with offset `t` and exponent range `[e_min, e_max]` (scalars or tensors
    broadcasting with `x`); shared with block log."""
    s = sign(x + t)
    e = round_log2(no_nan(x.abs()) + t)
    e = torch.maximum(torch.minimum(e, _t(e_max, x)), _t(e_min, x))
    return torch.where(torch.isnan(x), x, s * exp2i(e))


def _t(v, x):
    return v if torch.is_tensor(v) else torch.tensor(v, dtype=torch.int32, device=x.device)


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    e_min, e_max = exponent_range(f.width - 1, f.exponent_bias)
    # MASE's offset `min_pos * 0.1`, with `min_pos` a Python float.
    t = f32(0.1 * 2.0**e_min)
    return log_one(x, t, e_min, e_max)
