#!/usr/bin/env python3
"""A PyTorch model exported by torch.onnx's TorchScript exporter, for mase-interop's naming tests.

Run from the repository root with a Python that has torch and onnx:

    python scripts/make_pytorch_export_fixture.py

It writes crates/interop/tests/fixtures/pytorch/shared_bn_raw_param.onnx and, beside it,
shared_bn_raw_param.npz. The tests read these files; they need no Python.

The model reproduces two things PyTorch's exporter does that an importer must undo:

- Freshly initialised BatchNorm1d layers are identical (weight 1, bias 0, mean 0, variance 1).
  In evaluation mode the exporter deduplicates initializers by value, so all three batch norms
  of `seq_blocks` (indices 0, 3 and 6) read the same initializers, named after the first one,
  through `Identity` nodes whose outputs carry their own names; the node names
  (`/seq_blocks/seq_blocks.6/BatchNormalization`) say which module is which.
- `gain` is an `nn.Parameter` used directly in `forward` (`x * self.gain`); it becomes a plain
  initializer read by a `Mul`, not part of any layer.

The .npz holds:
- `x` (100 x 16, normal) and `y`, the model's outputs in evaluation mode;
- `param.<name>` for every trainable parameter and `buffer.<name>` for every buffer, under their
  state-dict names, and `trainable_count`, the number of trainable values;
- `xb` (the first 8 rows of `x`), `labels` (as float32) and `grad.<name>`: the gradients of the
  mean cross-entropy of `xb` in training mode (batch statistics), as PyTorch computes them.
"""
import pathlib

import numpy as np
import onnx
import torch
from torch import nn

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "crates/interop/tests/fixtures/pytorch"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq_blocks = nn.Sequential(
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.Linear(16, 16),
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.Linear(16, 16),
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.Linear(16, 5),
        )
        self.gain = nn.Parameter(torch.randn(5) * 0.5 + 1.0)

    def forward(self, x):
        return self.seq_blocks(x) * self.gain


def main():
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    net = Net().eval()
    path = OUT / "shared_bn_raw_param.onnx"
    torch.onnx.export(
        net,
        (torch.zeros(1, 16),),
        str(path),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
        opset_version=13,
        dynamo=False,
    )
    model = onnx.load(str(path))
    inits = [t.name for t in model.graph.initializer]
    bns = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    # The merged initializers are read through `Identity` nodes whose outputs carry each
    # module's state-dict names (`seq_blocks.6.weight = Identity(seq_blocks.0.weight)`).
    alias = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Identity"}
    shared = {tuple(alias.get(i, i) for i in n.input[1:]) for n in bns}
    assert len(bns) == 3 and len(shared) == 1, f"the exporter did not share the batch norms' initializers: {shared}"
    print("initializers:", inits)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 16)).astype(np.float32)
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy()
    arrays = {"x": x, "y": y}
    count = 0
    for name, p in net.named_parameters():
        arrays[f"param.{name}"] = p.detach().numpy().copy()
        count += p.numel()
    for name, b in net.named_buffers():
        if b.dtype == torch.float32:
            arrays[f"buffer.{name}"] = b.numpy().copy()
    arrays["trainable_count"] = np.array(count, dtype=np.int64)

    xb = x[:8]
    labels = np.array([0, 1, 2, 3, 4, 0, 1, 2], dtype=np.int64)
    net.train()
    loss = nn.functional.cross_entropy(net(torch.from_numpy(xb)), torch.from_numpy(labels))
    loss.backward()
    arrays["xb"] = xb
    arrays["labels"] = labels.astype(np.float32)
    for name, p in net.named_parameters():
        arrays[f"grad.{name}"] = p.grad.numpy().copy()
    np.savez(OUT / "shared_bn_raw_param.npz", **arrays)
    print(f"wrote {path} and shared_bn_raw_param.npz; {count} trainable values")


if __name__ == "__main__":
    main()
