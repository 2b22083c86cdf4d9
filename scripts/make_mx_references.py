"""Writes PyTorch's answers for the OCP microscaling (MX) formats, for crates/quant/tests/mx.rs.

usage: python3 scripts/make_mx_references.py [OUT_DIR]
       (OUT_DIR defaults to crates/quant/tests/fixtures beside this script's repository root)

The output, mx_torch.txt, has one line per tensor, `name count v1 v2 ...`, with values written as
Python writes floats (`nan`, `inf`, `-0.0`), which Rust's f32 parser reads back exactly. Each case
`<case>` has `<case>.shape`, `<case>.x` (the input, row-major) and `<case>.y` (the quantized
tensor); the case name gives the element format, the block size and the block axis.

The conversion is the OCP MX v1.0 one, written in torch: per block of `block` values along
`dim`, X = 2^clamp(floor(log2 max|x|) - emax_elem, -127, 127) (NaN for a block holding a NaN or
an infinity), then the elements. FP8 elements (E4M3, E5M2) are rounded by torch's own casts to
`torch.float8_e4m3fn` / `torch.float8_e5m2` (round half to even) after clamping to the largest
value (saturation); FP6, FP4 and INT8 elements, which torch has no cast for, by the formula
(`torch.round` is half to even). torch runs on the CPU with one thread, so the file is the same on
every run.
"""
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)

# name: (emax_elem, element function of a float32 tensor of scaled values)
def fp_formula(m, emin, vmax):
    def f(v):
        a = v.abs()
        e = torch.floor(torch.log2(a)).clamp(min=emin)
        e = torch.where(a == 0, torch.full_like(e, emin), e)
        step = torch.exp2(e - m)
        q = torch.minimum(torch.round(a / step) * step, torch.tensor(vmax))
        return torch.copysign(q, v)
    return f


def cast(dtype, vmax):
    return lambda v: v.clamp(-vmax, vmax).to(dtype).to(torch.float32)


def int_formula(width):
    frac, hi = width - 2, 2 ** (width - 1) - 1
    return lambda v: torch.round(v * 2.0**frac).clamp(-hi, hi) / 2.0**frac


ELEMENTS = {
    "int8": (0, int_formula(8)),
    "e4m3": (8, cast(torch.float8_e4m3fn, 448.0)),
    "e5m2": (15, cast(torch.float8_e5m2, 57344.0)),
    "e3m2": (4, fp_formula(2, -2, 28.0)),
    "e2m3": (2, fp_formula(3, 0, 7.5)),
    "e2m1": (2, fp_formula(1, 0, 6.0)),
}


def mx(x, elem, block, dim):
    emax, f = ELEMENTS[elem]
    xt = x.movedim(dim, -1)
    n = xt.shape[-1]
    xp = F.pad(xt, (0, (-n) % block))
    xb = xp.reshape(*xp.shape[:-1], -1, block)
    amax = xb.abs().amax(-1, keepdim=True)
    finite = torch.isfinite(xb).all(-1, keepdim=True)
    e = (torch.floor(torch.log2(amax.double())) - emax).clamp(-127, 127)
    e = torch.where(amax == 0, torch.full_like(e, -127), e)
    scale = torch.where(finite, torch.exp2(e), torch.full_like(e, math.nan)).float()
    y = f(xb / scale) * scale
    y = torch.where(finite, y, torch.full_like(y, math.nan))
    return y.reshape(xp.shape)[..., :n].movedim(-1, dim).contiguous()


def fmt(v):
    return repr(float(v))


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/quant/tests/fixtures"
    g = torch.Generator().manual_seed(2026)
    lines = []

    def case(name, x, elem, block, dim):
        y = mx(x, elem, block, dim)
        for key, t in (("shape", torch.tensor(x.shape, dtype=torch.float32)), ("x", x), ("y", y)):
            vals = t.flatten().tolist()
            lines.append(f"{name}.{key} {len(vals)} " + " ".join(fmt(v) for v in vals))

    # Rows of normal values at scales from 2^-140 (blocks whose scale clamps at 2^-127) to 2^100.
    scales = torch.tensor([2.0**-140, 2.0**-20, 1e-3, 1.0, 3.0, 1e4, 2.0**100])
    normal = torch.randn(7, 70, generator=g) * scales[:, None]
    # Edge values: ties of every element grid relative to a block maximum of 1, specials, zeros.
    edge = torch.tensor(
        [1.0, 0.5, 0.75, 0.625, 0.5625, 0.53125, 0.515625, 1.0 / 3, -0.25, 0.125,
         1.9921875, -1.99, 1e-9, -1e-9, 0.0, -0.0, 2.0**-130, 1.5, 0.96875, 0.875,
         1.0, 2.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
         1.0, math.nan, 0.5, 0.25, 3.0, -1.0, 0.1, 0.2, 0.3, 0.4,
         1.0, math.inf, 0.5, 0.25, 3.0, -1.0, 0.1, 0.2, 0.3, 0.4,
         7.0, 6.5, 5.0, -6.9, 4.5, 3.25, 2.75, 1.25, 0.0625, -math.inf],
        dtype=torch.float32,
    ).reshape(6, 10)
    for elem in ELEMENTS:
        case(f"{elem}_b32_last", normal, elem, 32, -1)
        case(f"{elem}_b5_dim0", normal[:, :10].contiguous(), elem, 5, 0)
        case(f"{elem}_b10_last_edge", edge, elem, 10, -1)
        case(f"{elem}_b4_dim0_edge", edge, elem, 4, 0)
    (out_dir / "mx_torch.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
