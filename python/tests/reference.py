"""Numpy reimplementations of the small models the tests run, and MASE's integer quantizer."""

import numpy as np


def integer_quantize(x, width, frac_width):
    """MASE's `integer_quantizer`: round half to even on the 2^-frac grid, clamp to `width`
    signed bits."""
    scale = 2.0**frac_width
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    return np.clip(np.round(x * scale), lo, hi) / scale


def jsc_tiny_eval(sd, x, quant=None):
    """jsc-tiny (BatchNorm1d, ReLU, Linear, ReLU) in eval mode; `quant = (width, frac)` quantizes
    the linear layer's input, weight and bias."""
    bn = (x - sd["seq_blocks.0.running_mean"]) / np.sqrt(sd["seq_blocks.0.running_var"] + 1e-5)
    h = np.maximum(bn * sd["seq_blocks.0.weight"] + sd["seq_blocks.0.bias"], 0.0)
    w, b = sd["seq_blocks.2.weight"], sd["seq_blocks.2.bias"]
    if quant is not None:
        h, w, b = (integer_quantize(t, *quant) for t in (h, w, b))
    return np.maximum(h @ w.T + b, 0.0)
