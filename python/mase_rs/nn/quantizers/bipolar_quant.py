"""QONNX `BipolarQuant` (the quant crate's `bipolar_quant.rs`): `(x >= 0 ? 1 : -1) * scale`; NaN
gives `-scale`."""

import torch

from ._fields import check_broadcast, check_param, read
from ._qonnx import param

NAME = "bipolar_quant"


def validate(fmt):
    f = read(fmt, "bipolar_quant", {"scale": "tensor"})
    check_param("bipolar_quant", "scale", f.scale, True)
    return f


def quantize(x, fmt, *, generator=None):
    f = validate(fmt)
    check_broadcast("bipolar_quant", "scale", f.scale, x.shape)
    one = torch.ones_like(x)
    return torch.where(x >= 0, one, -one) * param(f.scale, x)
