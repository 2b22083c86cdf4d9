"""`mxint` and `mxfp`: the OCP microscaling formats (the quant crate's `mx.rs`, `mxint.rs`,
`mxfp.rs`).

Blocks of `block_size` values along `block_dim` share a power-of-two scale
`X = 2^clamp(floor(log2 max|x|) - emax_elem, -127, 127)` (E8M0; `2^-127` for a block of zeros,
NaN for a block holding a NaN or an infinity, which makes the whole block NaN). Each value is
`elem(v * (1 / X)) * X` in float32, the element rounded half to even and saturating:

- `mxint`: `clamp(round(v * 2^(w-2)), ±(2^(w-1) - 1)) / 2^(w-2)`, `emax_elem = 0`;
- `mxfp`: the element formats E4M3 (max 448), E5M2 (57344), E3M2 (28), E2M3 (7.5), E2M1 (6), with
  subnormals, `emax_elem` the exponent of the largest power of two below the maximum.
"""

import torch

from ._bits import clamp_nan, exp2i
from ._fields import param_error, read

ELEMENTS = {(4, 3): 448.0, (5, 2): 57344.0, (3, 2): 28.0, (2, 3): 7.5, (2, 1): 6.0}
SCALE_EMIN, SCALE_EMAX = -127, 127


def _check_block(name, block_size):
    if block_size == 0:
        raise param_error(name, "block_size", 0, "must be at least 1 (the OCP MX block is 32)")


def _axis(name, block_dim, shape):
    r = max(len(shape), 1)
    a = block_dim + r if block_dim < 0 else block_dim
    if not 0 <= a < r:
        raise ValueError(
            f"{name} format: `block_dim` = {block_dim} is not an axis of a tensor of shape {list(shape)} (expected {-r}..={r - 1})"
        )
    return a


def _floor_log2(a):
    """floor(log2 a) of positive float32 values (normal or subnormal), exactly."""
    _, e = torch.frexp(a)
    return e.to(torch.int32) - 1


def _blocked(x, name, block_size, block_dim, emax_elem, elem):
    if x.numel() == 0:
        return x.clone()
    shape = x.shape
    a = _axis(name, block_dim, shape)
    xt = x.reshape(1) if x.dim() == 0 else x
    xt = xt.movedim(a, -1)
    n = xt.shape[-1]
    pad = (-n) % block_size
    xp = torch.nn.functional.pad(xt, (0, pad)) if pad else xt
    xb = xp.reshape(*xp.shape[:-1], -1, block_size)
    mag = xb.abs()
    finite = torch.isfinite(xb).all(-1, keepdim=True)
    amax = torch.where(finite, mag, torch.zeros_like(mag)).amax(-1, keepdim=True)
    e = (_floor_log2(amax) - emax_elem).clamp(SCALE_EMIN, SCALE_EMAX)
    e = torch.where(amax == 0, torch.full_like(e, SCALE_EMIN), e)
    nan = torch.full_like(amax, float("nan"))
    scale = torch.where(finite, exp2i(e), nan)
    inv = torch.where(finite, exp2i(-e), nan)
    y = elem(xb * inv) * scale
    y = y.reshape(xp.shape)[..., :n].movedim(-1, a)
    return y.reshape(shape).contiguous()


def validate_int(fmt):
    f = read(fmt, "mxint", {"width": "u32", "block_size": "usize", "block_dim": "i64"})
    if not 2 <= f.width <= 8:
        raise param_error("mxint", "width", f.width, "must be between 2 and 8 (MXINT8 is 8)")
    _check_block("mxint", f.block_size)
    return f


def quantize_int(x, fmt, *, generator=None):
    f = validate_int(fmt)
    frac = torch.tensor(f.width - 2, dtype=torch.int32)
    up, down = exp2i(frac).item(), exp2i(-frac).item()
    hi = float(2 ** (f.width - 1) - 1)

    def elem(v):
        return clamp_nan(torch.round(v * up), -hi, hi) * down

    return _blocked(x, "mxint", f.block_size, f.block_dim, 0, elem)


def validate_fp(fmt):
    f = read(fmt, "mxfp", {"exponent_width": "u32", "frac_width": "u32", "block_size": "usize", "block_dim": "i64"})
    if (f.exponent_width, f.frac_width) not in ELEMENTS:
        raise param_error(
            "mxfp",
            "exponent_width",
            f"{f.exponent_width} with frac_width = {f.frac_width}",
            "must name an OCP MX element format: E4M3 (4, 3), E5M2 (5, 2), E3M2 (3, 2), E2M3 (2, 3) or E2M1 (2, 1)",
        )
    _check_block("mxfp", f.block_size)
    return f


def quantize_fp(x, fmt, *, generator=None):
    f = validate_fp(fmt)
    vmax = ELEMENTS[(f.exponent_width, f.frac_width)]
    m = f.frac_width
    emin = 1 - ((1 << (f.exponent_width - 1)) - 1)
    emax = int(torch.floor(torch.log2(torch.tensor(vmax, dtype=torch.float64))).item())

    def elem(v):
        a = v.abs()
        # floor(log2 a) from the exponent bits; subnormals and zero fall to `emin` by the clamp.
        e = ((a.view(torch.int32) >> 23) - 127).clamp(emin, emax)
        q = torch.round(a * exp2i(m - e)) * exp2i(e - m)
        q = torch.where(q > vmax, torch.full_like(q, vmax), q)
        return torch.copysign(q, v)

    return _blocked(x, "mxfp", f.block_size, f.block_dim, emax, elem)
