"""`block_log`: the log format with an exponent bias shared by a block (the quant crate's
`block_log.rs`).

`bias = clamp(2^(w-1) - 1 - ceil(log2(max |x| over the block)), 0, 2^ebw - 1)`,
`out = log(x, width, exponent_bias = bias)` with offset `t = 2^-bias * 0.1` in float32. A NaN
makes its block NaN; ±inf saturate to `±2^e_max`."""

import torch

from ._bits import no_nan, ceil_log2, exp2i, exponent_range, f32
from ._fields import check_bias_width, check_block_size, read
from .block import run_blocks
from .log import log_one, validate_width

NAME = "block_log"
FIELDS = {"width": "u32", "exponent_bias_width": "u32", "block_size": "sizes", "skip_first_dim": "bool"}


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    validate_width(NAME, f.width)
    check_bias_width(NAME, f.exponent_bias_width)
    check_block_size(NAME, f.block_size)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    top = (1 << (f.width - 1)) - 1
    bias_max = (1 << f.exponent_bias_width) - 1

    def per_block(m):
        bias = (top - ceil_log2(no_nan(m))).clamp(0, bias_max)
        lo, hi = exponent_range(f.width - 1, bias)
        # `min_pos * 0.1` with `min_pos = 2 ** bias_tensor`: a float32 product.
        return (exp2i(lo) * f32(0.1), lo, hi), torch.isnan(m)

    def elem(v, params):
        (t, lo, hi), nan_block = params
        q = log_one(v, t, lo, hi)
        return torch.where(nan_block, torch.full_like(q, float("nan")), q)

    return run_blocks(x, f.block_size, f.skip_first_dim, per_block, elem)
