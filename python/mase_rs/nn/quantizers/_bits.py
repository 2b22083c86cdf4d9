"""Exact arithmetic shared by the formats, as torch operations on float32 tensors: the helpers of
the quant crate's `round.rs`. Base-2 logarithms come from `torch.frexp` (exact for every float32,
subnormals included) and powers of two are built from their bits, never with `torch.log2` or
`torch.pow`, so that they are exact on every device; rounding and clamping keep NaN and the sign
of zero as the Rust kernels do."""

import torch

# Sentinel exponents of 0 and infinity; clamping turns them into a format's minimum and maximum.
# Exponents are int32 tensors: the sentinels leave room for the formats' arithmetic on them.
LOG2_ZERO = -(2**20)
LOG2_INF = 2**20


def f32(v):
    """`v` rounded to the nearest float32, as a Python float (exact in any torch arithmetic)."""
    return torch.tensor(float(v), dtype=torch.float64).to(torch.float32).item()


MIN_POSITIVE = f32(2.0**-126)
# The largest significand in [0.5, 1) whose square is at most 1/2: 0xB504F3 / 2^24, exact in
# float32. `round(log2)` rounds up above it (sqrt(2) is irrational, so there are no ties).
SQRT_HALF_FLOOR = 0xB504F3 / 2.0**24


def exp2i(e):
    """`2^e` as float32 for an integer tensor `e`: inf above 2^127, subnormal powers down to
    2^-149, 0 below (the Rust `exp2i`), built from the bits."""
    e = e.to(torch.int32)
    normal = (e.clamp(-126, 127) + 127) << 23
    sub = torch.ones_like(e) << (e.clamp(-149, -127) + 149)
    bits = torch.where(e >= -126, normal, sub)
    bits = torch.where(e > 127, torch.full_like(bits, 0x7F800000), bits)
    bits = torch.where(e < -149, torch.zeros_like(bits), bits)
    return bits.view(torch.float32)


def _frexp(a):
    """`a = m * 2^e` with `m` in [0.5, 1): exact for every finite float32, subnormals included."""
    m, e = torch.frexp(a)
    return m, e.to(torch.int32)


def _special(a, value):
    value = torch.where(a == 0, torch.full_like(value, LOG2_ZERO), value)
    return torch.where(a == float("inf"), torch.full_like(value, LOG2_INF), value)


def floor_log2(a):
    """`floor(log2(a))` of a non-negative, non-NaN float32 tensor, as int32."""
    _, e = _frexp(a)
    return _special(a, e - 1)


def ceil_log2(a):
    """`ceil(log2(a))` of a non-negative, non-NaN float32 tensor, as int32: one more than the
    floor unless `a` is a power of two."""
    m, e = _frexp(a)
    return _special(a, e - (m == 0.5).to(torch.int32))


def round_log2(a):
    """`round(log2(a))` of a non-negative, non-NaN float32 tensor, as int32: the floor, plus one
    when the significand exceeds sqrt(2)."""
    m, e = _frexp(a)
    return _special(a, e - 1 + (m > SQRT_HALF_FLOOR).to(torch.int32))


def clamp_nan(v, lo, hi):
    """`v` clamped to `[lo, hi]` with NaN kept and -0.0 kept at a bound of 0.0 (two selects)."""
    v = torch.where(v < lo, lo, v)
    return torch.where(v > hi, hi, v)


def sign(v):
    """`torch.sign` keeping the value of ±0 and NaN: 1, -1, or `v` itself."""
    one = torch.ones_like(v)
    return torch.where(v > 0, one, torch.where(v < 0, -one, v))


def close_to_zero(v):
    """`|v| <= 1e-8` in float32: MASE's `isclose(x, 0)`, whose values pass through."""
    return v.abs() <= f32(1e-8)


def zero_passthrough(v, q):
    """MASE's `(~close) * q + close * x`: values within 1e-8 of zero give `0 * q + x`."""
    return torch.where(close_to_zero(v), q * 0.0 + v, q)


def exponent_range(exponent_width, bias):
    """`(-B, 2^E - 1 - B)` with MASE's default bias `2^(E-1) - 1` when `bias` is None; `bias` may
    be an int32 tensor (a per-block bias)."""
    b = (1 << (exponent_width - 1)) - 1 if bias is None else bias
    return -b, (1 << exponent_width) - 1 - b


def round_half_up(v):
    """Half away from zero (`f32::round`), exact: the fractional part of a float32 is exact."""
    r = torch.trunc(v)
    return torch.where((v - r).abs() >= 0.5, r + torch.copysign(torch.ones_like(v), v), r)


def round_half_down(v):
    """Half towards zero at ties, nearest otherwise."""
    r = torch.trunc(v)
    return torch.where((v - r).abs() == 0.5, r, round_half_up(v))


def round_up(v):
    """Away from zero; `-0.0 >= 0` keeps the sign of zero."""
    return torch.where(v >= 0, torch.ceil(v), torch.floor(v))


# QONNX rounding modes (`rounding_mode` as the IR writes it) and their exact torch functions.
ROUNDING = {
    "ROUND": torch.round,
    "CEIL": torch.ceil,
    "FLOOR": torch.floor,
    "UP": round_up,
    "DOWN": torch.trunc,
    "HALF_UP": round_half_up,
    "HALF_DOWN": round_half_down,
}


def row_sums_f64(rows):
    """Sums of a 2-D tensor's rows in float64, added in index order as the Rust kernels add them
    (a running sum: `cumsum`, sequential on the CPU)."""
    if rows.shape[1] == 0:
        return torch.zeros(rows.shape[0], dtype=torch.float64, device=rows.device)
    return torch.cumsum(rows.to(torch.float64), dim=1)[:, -1]


def row_len(shape, numel):
    """Length of the rows that binary and ternary reduce over: everything but the first dimension."""
    if len(shape) > 0 and shape[0] > 0:
        return max(numel // shape[0], 1)
    return max(numel, 1)


def no_nan(v):
    """`v` with NaN replaced by 0 (and ±inf kept, unlike `torch.nan_to_num`): the input of the
    logarithm helpers, for values whose NaN result is restored afterwards."""
    return torch.where(torch.isnan(v), torch.zeros_like(v), v)
