"""`nn.Embedding` for mase-rs graphs, whose values are floats: the ids arrive as a float tensor
of whole numbers (or as integers, as PyTorch passes them), and any id that is not a whole number
in `0..num_embeddings` raises `ValueError` instead of being truncated.

>>> import torch
>>> m = Embedding(4, 2)
>>> bool(torch.equal(m(torch.tensor([[3.0, 0.0]])), m.weight[[3, 0]].unsqueeze(0)))
True
>>> m(torch.tensor([1.5]))
Traceback (most recent call last):
...
ValueError: embedding: id 1.5 at index 0 is not a whole number in 0..4
"""

import torch
from torch import nn


def as_indices(ids, num_embeddings):
    """`ids` as an int64 tensor, after checking that each is a whole number in `0..num_embeddings`."""
    if not ids.is_floating_point():
        return ids.long()
    flat = ids.detach().reshape(-1)
    bad = ~((flat == flat.floor()) & (flat >= 0) & (flat < num_embeddings))
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        v = float(flat[i])
        shown = int(v) if v.is_integer() else v
        raise ValueError(f"embedding: id {shown} at index {i} is not a whole number in 0..{num_embeddings}")
    return ids.long()


class Embedding(nn.Embedding):
    """`nn.Embedding` that takes float ids (mase-rs graph values) as well as integer ones."""

    def forward(self, ids):
        return super().forward(as_indices(ids, self.num_embeddings))
