"""Writes the 50-step PyTorch parity fixture of mase-rs's runtime.

usage: /work/pyenv/bin/python scripts/make_parity_fixtures.py [OUT_DIR]
       (OUT_DIR defaults to crates/runtime/tests/fixtures beside this script's repository root)

jsc-toy (MASE's JSC_Toy: seq_blocks = BN16, ReLU, Linear16-8, BN8, ReLU, Linear8-8, BN8, ReLU,
Linear8-5, BN5, ReLU) is built after torch.manual_seed(0) and trained in train mode for 50 steps of
Adam(lr=1e-3) with cross-entropy, over consecutive batches of 256 rows of a seeded synthetic
jsc-shaped data set of 2048 rows (the 8 batches are cycled in order, without shuffling).

The output, jsc_toy_50_steps.safetensors, holds
  x        float32 [2048, 16]  the data set
  y        float32 [2048]      the class labels 0..4 (stored as float so every tensor is f32)
  losses   float32 [50]        the loss of each step, computed before that step's update
  init.*   the state_dict before training (parameters and BatchNorm running statistics)
  final.*  the state_dict after the 50 steps
num_batches_tracked is left out: mase-rs's parameter store does not keep it.

The safetensors file is written by hand (8-byte little-endian header length, JSON header, raw
little-endian data) so the script needs only torch and numpy.
"""
import json
import pathlib
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, FEATURES, CLASSES, BATCH, STEPS, LR = 2048, 16, 5, 256, 50, 1e-3


class JscToy(nn.Module):
    """MASE's JSC_Toy with the module path `seq_blocks.<i>` of its state dict."""

    def __init__(self):
        super().__init__()
        self.seq_blocks = nn.Sequential(
            nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8),
            nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8),
            nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 5),
            nn.BatchNorm1d(5), nn.ReLU(),
        )

    def forward(self, x):
        return self.seq_blocks(x)


def jsc_dataset(n, seed=7):
    """Synthetic rows shaped like the jet data: 16 features of different scales and offsets, and
    labels that depend on the features (the generator of shared/reference/torch_bench.py)."""
    r = np.random.default_rng(seed)
    proj = r.standard_normal((FEATURES, CLASSES)).astype(np.float32)
    z = r.standard_normal((n, FEATURES)).astype(np.float32)
    scale = 0.5 + np.arange(FEATURES, dtype=np.float32) * 0.3
    offs = (np.arange(FEATURES, dtype=np.float32) - 8.0) * 0.7
    x = z * scale + offs
    y = (z @ proj).argmax(1)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def state(model, prefix):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype("<f4"))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # The format allows space padding; 8-byte alignment helps mmap readers.
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = JscToy()
    x, y = jsc_dataset(ROWS)
    init = state(model, "init")
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    model.train()
    losses = []
    nb = ROWS // BATCH
    for s in range(STEPS):
        b = s % nb
        xb, yb = x[b * BATCH:(b + 1) * BATCH], y[b * BATCH:(b + 1) * BATCH]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    tensors = {"x": x, "y": y.to(torch.float32), "losses": torch.tensor(losses, dtype=torch.float32), **init, **state(model, "final")}
    meta = {"torch": torch.__version__, "numpy": np.__version__, "script": "scripts/make_parity_fixtures.py",
            "model": "jsc-toy", "steps": str(STEPS), "batch": str(BATCH), "lr": str(LR), "seed": "0", "data_seed": "7"}
    path = out_dir / "jsc_toy_50_steps.safetensors"
    write_safetensors(path, tensors, meta)
    print(f"wrote {path} ({path.stat().st_size} bytes); loss {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
