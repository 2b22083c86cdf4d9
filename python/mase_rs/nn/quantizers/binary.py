"""`binary` (the quant crate's `binary.rs`), on tensors of any rank.

- bipolar: `x >= 0 ? 1 : -1` (NaN gives -1);
- zero-scaled (not bipolar): `alpha_i = mean |x|` over each index `i` of the first dimension,
  `out = (x > 0) * alpha_i`, the mean summed in float64 in index order;
- stochastic: `p = clamp((x + 1) / 2, 0, 1)`; bipolar draws `r ~ U[0, 1)` per value and gives
  `p >= r ? 1 : -1`; zero-scaled applies the rule above to `p` and draws nothing.

Stochastic bipolar draws with `torch.rand` (from `generator` when one is given): the same
distribution as the Rust kernel, not the same numbers, since the Rust random stream cannot be
reproduced by torch. Everything else equals the Rust kernel bit for bit."""

import torch

from ._bits import clamp_nan, row_len, row_sums_f64
from ._fields import read

NAME = "binary"
FIELDS = {"stochastic": "bool", "bipolar": "bool"}


def validate(fmt):
    return read(fmt, NAME, FIELDS)


def _prob(x):
    return clamp_nan((x + 1.0) / 2.0, 0.0, 1.0)


def _zero_scaled(v):
    if v.numel() == 0:
        return v.clone()
    n = row_len(v.shape, v.numel())
    rows = v.reshape(-1, n)
    alpha = (row_sums_f64(rows.abs()) / n).to(torch.float32)
    pos = torch.where(rows > 0, torch.ones_like(rows), torch.zeros_like(rows))
    return (pos * alpha[:, None]).reshape(v.shape)


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    one = torch.ones_like(x)
    if f.bipolar and not f.stochastic:
        return torch.where(x >= 0, one, -one)
    if f.bipolar:
        r = torch.rand(x.shape, generator=generator, dtype=torch.float32, device=x.device)
        return torch.where(_prob(x) >= r, one, -one)
    return _zero_scaled(_prob(x) if f.stochastic else x)
