"""Shared by the QONNX formats (`int_quant`, `bipolar_quant`, `float_quant`): their parameter
tensors, per tensor or per channel (NumPy broadcasting against the data, or a single value)."""

import torch


def param(tensor, x):
    """A parameter as a float32 tensor that broadcasts against `x` (a single value as a scalar)."""
    shape, data = tensor
    if len(data) == 1:
        return torch.tensor(data[0], dtype=torch.float32, device=x.device)
    return torch.tensor(data, dtype=torch.float32, device=x.device).reshape(shape)


def integer_in(v, lo, hi):
    return v == v and abs(v) != float("inf") and v == int(v) and lo <= v <= hi
