"""`ternary` (the quant crate's `ternary.rs`), with its threshold honoured, on tensors of any rank.

Per index `i` of the first dimension: `delta_i = threshold`, or `0.75 * sum |x_i| / n` when none is
given; `t = 1` where `x > delta_i`, `-1` where `x < -delta_i`, else 0; scaled:
`out = t * alpha_i` with `alpha_i` the mean of `|x|` over the values with `|x| > delta_i` (0 when
there are none), else `out = t`. Sums are taken in float64, in index order."""

import math

import torch

from ._bits import row_len, row_sums_f64
from ._fields import param_error, read

NAME = "ternary"
FIELDS = {"scaling_factor": "bool", "threshold": "opt_f32"}


def validate(fmt):
    f = read(fmt, NAME, FIELDS)
    if f.threshold is not None and not (math.isfinite(f.threshold) and f.threshold >= 0):
        raise param_error(NAME, "threshold", f.threshold, "must be a finite number >= 0")
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    if x.numel() == 0:
        return x.clone()
    n = row_len(x.shape, x.numel())
    rows = x.reshape(-1, n)
    a = rows.abs()
    if f.threshold is None:
        delta = ((0.75 * row_sums_f64(a)) / n).to(torch.float32)[:, None]
    else:
        delta = torch.full((rows.shape[0], 1), f.threshold, dtype=torch.float32, device=x.device)
    if f.scaling_factor:
        above = a > delta
        total = row_sums_f64(torch.where(above, a, torch.zeros_like(a)))
        count = above.sum(dim=1).to(torch.float64)
        alpha = torch.where(count == 0, torch.zeros_like(total), total / count.clamp(min=1)).to(torch.float32)[:, None]
    else:
        alpha = torch.ones_like(delta)
    one = torch.ones_like(rows)
    t = torch.where(rows > delta, one, torch.where(rows < -delta, -one, torch.zeros_like(rows)))
    return (t * alpha).reshape(x.shape)
