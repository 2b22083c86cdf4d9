"""Writes PyTorch's answers for layer norm, group norm and the pools' ceil_mode, padding and
count_include_pad settings, on ordinary values, odd sizes and NaN/inf inputs.

usage: python3 scripts/make_norm_pool_references.py [OUT_DIR]
       (OUT_DIR defaults to crates/runtime/tests/fixtures beside this script's repository root)

The output, norm_pool_ops.txt, has the format of nonfinite_ops.txt (one line per tensor,
`name count v1 v2 ...`, values as Python writes floats). Each case `<case>` has
  <case>.shape   the input's shape
  <case>.x       the input (row-major)
  <case>.p.<n>   the module's parameter `<n>`, or the weight and bias a function call reads
  <case>.y       PyTorch's forward output (training mode; these ops have no other)
  <case>.dy      the output gradient fed to backward
  <case>.dx      PyTorch's gradient of the input
  <case>.g.<n>   PyTorch's gradient of parameter `<n>`
Used by crates/runtime/tests/norm_pool_parity.rs, whose table builds each case's graph.

torch runs on the CPU with one thread, so the file is the same on every run.
"""
import math
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
NAN, INF = math.nan, math.inf


def fmt(v):
    return repr(float(v))


class Writer:
    def __init__(self):
        self.lines = []
        self.gen = torch.Generator().manual_seed(20)

    def tensor(self, name, x):
        vals = [fmt(v) for v in x.detach().reshape(-1).tolist()]
        self.lines.append(f"{name} {len(vals)} {' '.join(vals)}")

    def normal(self, *shape):
        return torch.randn(*shape, generator=self.gen)

    def case(self, name, x, f, params=None):
        """Runs `f(x)` with a deterministic output gradient and records it; `params` are the
        tensors `f` reads (a module's parameters or a function's weight and bias)."""
        x = x.clone().requires_grad_(True)
        params = params or {}
        y = f(x)
        n = y.numel()
        dy = torch.tensor([0.5 + 0.25 * (i % 5) - (i % 2) for i in range(n)], dtype=torch.float32).reshape(y.shape)
        self.lines.append(f"{name}.shape {x.dim()} {' '.join(str(float(s)) for s in x.shape)}")
        self.tensor(f"{name}.x", x)
        for pname, p in params.items():
            self.tensor(f"{name}.p.{pname}", p)
        self.tensor(f"{name}.y", y)
        y.backward(dy)
        self.tensor(f"{name}.dy", dy)
        self.tensor(f"{name}.dx", x.grad)
        for pname, p in params.items():
            self.tensor(f"{name}.g.{pname}", p.grad)

    def module(self, name, m, x):
        """A module with random weights away from its initial ones (so ones and zeros hide nothing)."""
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(p + 0.5 * self.normal(*p.shape))
        self.case(name, x, m, dict(m.named_parameters()))

    def function(self, name, x, f, shapes):
        """`f(x, *params)` with random leaf tensors of `shapes` (`weight`, then `bias`)."""
        params = {k: self.normal(*s).requires_grad_(True) for k, s in shapes.items()}
        self.case(name, x, lambda v: f(v, *params.values()), params)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    w = Writer()

    # Layer norm: over one and two trailing dims, without bias, without affine, as a function.
    w.module("ln", nn.LayerNorm(5), 2.0 * w.normal(3, 5) + 1.0)
    w.module("ln_2d", nn.LayerNorm((3, 4), bias=False), w.normal(2, 3, 4))
    w.module("ln_plain", nn.LayerNorm(6, elementwise_affine=False), w.normal(2, 2, 6))
    w.function("ln_fn", w.normal(2, 3, 4), lambda v, a, b: F.layer_norm(v, (4,), a, b, 1e-6), {"weight": [4], "bias": [4]})
    # Rows holding NaN, +inf, -inf, both infinities, and a constant row (variance 0).
    rows = torch.tensor(
        [[NAN, 1, 2, 3], [INF, 1, 2, 3], [-INF, 1, 2, 3], [INF, -INF, 1, 2], [5, 5, 5, 5], [1, 2, 3, 4]], dtype=torch.float32
    )
    w.module("ln_nonfinite", nn.LayerNorm(4), rows)

    # Group norm: [N, C, H, W], [N, C, L] with a group per channel, [N, C], as a function.
    w.module("gn", nn.GroupNorm(2, 4), w.normal(2, 4, 3, 3))
    w.module("gn_per_channel", nn.GroupNorm(3, 3), w.normal(2, 3, 5))
    w.module("gn_one_group", nn.GroupNorm(1, 6, affine=False), w.normal(3, 6))
    w.function("gn_fn", w.normal(2, 4, 3), lambda v, a, b: F.group_norm(v, 2, a, b, 1e-5), {"weight": [4], "bias": [4]})
    groups = torch.tensor([[[1.0, 2], [3, INF], [4, 5], [6, 7]], [[NAN, 1], [2, 3], [1, 1], [1, 1]]], dtype=torch.float32)
    w.module("gn_nonfinite", nn.GroupNorm(2, 4), groups)

    # ceil_mode: squeezenet's MaxPool2d(3, 2, ceil_mode=True) on odd and even sizes, whose last
    # window is partial; padding with ceil_mode; a NaN and an inf inside the partial window.
    w.case("mp_ceil", w.normal(1, 2, 7, 7), nn.MaxPool2d(3, 2, ceil_mode=True))
    w.case("mp_ceil_even", w.normal(1, 2, 6, 5), nn.MaxPool2d(3, 2, ceil_mode=True))
    w.case("mp1_ceil_pad", w.normal(2, 2, 6), nn.MaxPool1d(2, 2, 1, ceil_mode=True))
    partial = w.normal(1, 1, 6, 6)
    partial[0, 0, 5, 5] = NAN
    partial[0, 0, 2, 5] = INF
    w.case("mp_ceil_nonfinite", partial, nn.MaxPool2d(3, 2, ceil_mode=True))
    # Average pools: ceil_mode divides a partial window by the part inside the padded input;
    # count_include_pad=False divides by the part inside the input.
    w.case("ap_ceil", w.normal(1, 2, 6, 7), nn.AvgPool2d(3, 2, ceil_mode=True))
    w.case("ap_ceil_pad", w.normal(1, 1, 6, 6), nn.AvgPool2d(3, 2, 1, ceil_mode=True))
    w.case("ap_no_pad_count", w.normal(1, 2, 5, 5), nn.AvgPool2d(3, 2, 1, count_include_pad=False))
    w.case("ap_ceil_no_pad_count", w.normal(1, 1, 6, 6), nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False))
    w.case("ap1_ceil_no_pad_count", w.normal(2, 2, 6), nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False))
    # Adaptive pools to sizes that do not divide the input (overlapping windows), a NaN and an
    # inf in an adaptive max pool's windows.
    w.case("aap_7x5_to_3x4", w.normal(1, 2, 7, 5), nn.AdaptiveAvgPool2d((3, 4)))
    w.case("aap1_10_to_4", w.normal(2, 1, 10), nn.AdaptiveAvgPool1d(4))
    w.case("amp_7x5_to_3x4", w.normal(1, 2, 7, 5), nn.AdaptiveMaxPool2d((3, 4)))
    special = w.normal(2, 1, 10)
    special[0, 0, 2] = NAN
    special[1, 0, 7] = INF
    w.case("amp1_10_to_4_nonfinite", special, nn.AdaptiveMaxPool1d(4))

    out = out_dir / "norm_pool_ops.txt"
    out.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {out} ({len(w.lines)} tensors)")


if __name__ == "__main__":
    main()
