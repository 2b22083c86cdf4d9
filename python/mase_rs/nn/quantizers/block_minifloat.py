"""`block_minifloat`: a minifloat whose exponent bias is shared by a block (the quant crate's
`block_minifloat.rs`).

`bias = clamp(floor(log2(max |x| over the block)), 0, 2^exponent_bias_width - 1)`,
`out = minifloat_ieee(x, width, exponent_width, exponent_bias = bias)`. A NaN makes its whole
block NaN; ±inf give NaN."""

import torch

from ._bits import no_nan, exponent_range, f32, floor_log2
from ._fields import check_bias_width, check_block_size, read
from .block import run_blocks
from .minifloat import ieee_one, validate_mini

NAME = "block_minifloat"
FIELDS = {"width": "u32", "exponent_width": "u32", "exponent_bias_width": "u32", "block_size": "sizes", "skip_first_dim": "bool"}


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    validate_mini(NAME, f.width, f.exponent_width, None)
    check_bias_width(NAME, f.exponent_bias_width)
    check_block_size(NAME, f.block_size)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    shift = f32(2.0 ** (f.width - f.exponent_width - 1))
    bias_max = (1 << f.exponent_bias_width) - 1

    def per_block(m):
        bias = floor_log2(no_nan(m)).clamp(0, bias_max)
        return exponent_range(f.exponent_width, bias), torch.isnan(m)

    def elem(v, params):
        (lo, hi), nan_block = params
        q = ieee_one(v, lo, hi, shift)
        return torch.where(nan_block, torch.full_like(q, float("nan")), q)

    return run_blocks(x, f.block_size, f.skip_first_dim, per_block, elem)
