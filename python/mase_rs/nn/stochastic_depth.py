"""torchvision's `StochasticDepth` for graphs that hold the op without torchvision's module (zoo
models, model files, ONNX imports): the same arithmetic, so `mg.model` runs without torchvision.

>>> import torch
>>> m = StochasticDepth(0.25, "row").eval()
>>> bool(torch.equal(m(torch.ones(2, 3)), torch.ones(2, 3)))
True
>>> m
StochasticDepth(p=0.25, mode=row)
"""

import torch
from torch import nn


def stochastic_depth(x, p, mode, training=True):
    """torchvision's `stochastic_depth`: in training, keeps each sample (`row`) or the whole
    batch (`batch`) with probability `1 - p`, scaled by `1 / (1 - p)`; the identity otherwise."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"stochastic_depth: p must be in [0, 1], got {p}")
    if mode not in ("row", "batch"):
        raise ValueError(f"stochastic_depth: mode must be 'row' or 'batch', got {mode!r}")
    if not training or p == 0.0:
        return x
    survival = 1.0 - p
    size = [x.shape[0]] + [1] * (x.ndim - 1) if mode == "row" else [1] * x.ndim
    noise = torch.empty(size, dtype=x.dtype, device=x.device).bernoulli_(survival)
    if survival > 0.0:
        noise.div_(survival)
    return x * noise


class StochasticDepth(nn.Module):
    """The module form of `stochastic_depth` (torchvision's `StochasticDepth(p, mode)`)."""

    def __init__(self, p, mode):
        super().__init__()
        self.p, self.mode = p, mode

    def forward(self, x):
        return stochastic_depth(x, self.p, self.mode, self.training)

    def __repr__(self):
        return f"{self.__class__.__name__}(p={self.p}, mode={self.mode})"
