"""Every number format of mase-rs as a PyTorch function, equal bit for bit on the CPU to the Rust
kernels of the quant crate (`crates/quant`).

A format is a dict exactly as the IR serialises a `QuantFormat` (JSON with the tag `name` and
snake_case fields):

>>> import torch
>>> from mase_rs.nn.quantizers import quantize
>>> quantize(torch.tensor([0.07, 100.0]), {"name": "integer", "width": 8, "frac_width": 4, "signed": True})
tensor([0.0625, 7.9375])

The forward pass is the format's formula in vectorised torch operations (any device, float32 in
and out, same shape); the backward pass is the straight-through estimator the Rust training uses
for every format: the gradient of the input is the gradient of the output, unchanged and
unmasked. Stochastic binary draws with `torch.rand` (from `generator` when one is given): the same
distribution as Rust's, not the same numbers. `quantize_native` runs the Rust kernel itself.
"""

import json

import numpy as np
import torch

from . import binary, bipolar_quant, block_fp, block_log, block_minifloat, float_quant, int_quant, integer, log, minifloat, mx, ternary

# Every format by the serde tag `name` of its `QuantFormat` variant, in the variants' order; the
# function `fn(x, fmt, *, generator=None)` validates `fmt` and quantizes `x` (no gradient rule).
FORMATS = {
    "integer": integer.quantize,
    "minifloat_denorm": minifloat.denorm,
    "minifloat_ieee": minifloat.ieee,
    "log": log.quantize,
    "block_fp": block_fp.quantize,
    "block_minifloat": block_minifloat.quantize,
    "block_log": block_log.quantize,
    "binary": binary.quantize,
    "ternary": ternary.quantize,
    "int_quant": int_quant.quantize,
    "bipolar_quant": bipolar_quant.quantize,
    "float_quant": float_quant.quantize,
    "mxint": mx.quantize_int,
    "mxfp": mx.quantize_fp,
}


class _StraightThrough(torch.autograd.Function):
    """The quantized values forward, the output's gradient unchanged backward."""

    @staticmethod
    def forward(ctx, x, fn, fmt, generator):
        return fn(x, fmt, generator=generator)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


def _lookup(fmt):
    if not isinstance(fmt, dict):
        raise TypeError(f"quantize: the format must be a dict with a `name`, got {type(fmt).__name__}")
    name = fmt.get("name")
    if name not in FORMATS:
        raise ValueError(f"quantize: unknown format `{name}`; the formats are {', '.join(FORMATS)}")
    return FORMATS[name]


def quantize(x, fmt, *, generator=None):
    """`x` (a float32 tensor) quantized with `fmt`, with the straight-through estimator as its
    gradient. `generator` (a `torch.Generator` on `x`'s device) is drawn from by stochastic
    binary only. Bad formats raise one-line `ValueError`s naming the field."""
    if not torch.is_tensor(x):
        raise TypeError(f"quantize: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.float32:
        raise TypeError(f"quantize: expected a float32 tensor, got {x.dtype}")
    fn = _lookup(fmt)
    if torch.is_grad_enabled() and x.requires_grad:
        return _StraightThrough.apply(x, fn, fmt, generator)
    return fn(x, fmt, generator=generator)


def quantize_native(x, fmt, *, seed=0):
    """`x` quantized with `fmt` by the Rust kernel (`mase_rs._native.quantize`): a numpy array or
    a torch tensor in, the same kind out (a tensor on `x`'s device). `seed` seeds the random
    numbers of stochastic formats."""
    from mase_rs import _native

    _lookup(fmt)
    if torch.is_tensor(x):
        out = _native.quantize(json.dumps(fmt), x.detach().to("cpu", torch.float32).numpy(), seed)
        return torch.from_numpy(out).to(x.device)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"quantize_native: expected a numpy array or a torch.Tensor, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"quantize_native: expected a float32 array, got {x.dtype}")
    return _native.quantize(json.dumps(fmt), x, seed)


def native_format_names():
    """The names of the formats the Rust quant crate implements, in its registry's order."""
    from mase_rs import _native

    return [name for name, _ in _native.quant_formats()]


__all__ = ["FORMATS", "native_format_names", "quantize", "quantize_native"]
