"""`block_fp` (MSFP): one exponent shared by a block (the quant crate's `block_fp.rs`; blocks as
in `block.py`).

`e = clamp(ceil(log2(max |x| over the block)), -B, 2^E - 1 - B)`, `M = width - 1`,
`mi = clamp(round((|x| + 1e-9) / 2^e * 2^M), 0, 2^M - 1)`, `out = sign(x + 1e-9) * 2^e * mi / 2^M`.
`|x| <= 1e-8` passes through (-0.0 becomes +0.0); a NaN makes its whole block NaN; ±inf give NaN."""

import torch

from ._bits import no_nan, ceil_log2, clamp_nan, exp2i, exponent_range, f32, sign, zero_passthrough
from ._fields import check_bias, check_block_size, param_error, read
from .block import run_blocks

NAME = "block_fp"
FIELDS = {"width": "u32", "exponent_width": "u32", "exponent_bias": "opt_i32", "block_size": "sizes", "skip_first_dim": "bool"}


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    if not 1 <= f.width <= 32:
        raise param_error(NAME, "width", f.width, "must be between 1 and 32 (sign and mantissa bits)")
    if not 1 <= f.exponent_width <= 8:
        raise param_error(NAME, "exponent_width", f.exponent_width, "must be between 1 and 8 (an f32 carrier has 8 exponent bits)")
    check_bias(NAME, f.exponent_bias)
    check_block_size(NAME, f.block_size)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    e_min, e_max = exponent_range(f.exponent_width, f.exponent_bias)
    shift = f32(2.0 ** (f.width - 1))

    def per_block(m):
        e = ceil_log2(no_nan(m)).clamp(e_min, e_max)
        return e, torch.isnan(m)

    def elem(v, params):
        e, nan_block = params
        p = exp2i(e)
        s = sign(v + f32(1e-9))
        mi = clamp_nan(torch.round((v.abs() + f32(1e-9)) / p * shift), 0.0, f32(shift - 1.0))
        q = zero_passthrough(v, s * p * (mi / shift))
        bad = nan_block | ~torch.isfinite(v)
        return torch.where(bad, torch.full_like(q, float("nan")), q)

    return run_blocks(x, f.block_size, f.skip_first_dim, per_block, elem)
