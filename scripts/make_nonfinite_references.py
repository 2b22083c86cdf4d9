"""Writes PyTorch's answers for NaN, +inf, -inf and -0.0 inputs of every runtime op.

usage: python3 scripts/make_nonfinite_references.py [OUT_DIR [QUANT_OUT_DIR]]
       (OUT_DIR defaults to crates/runtime/tests/fixtures and QUANT_OUT_DIR to
       crates/quant/tests/fixtures beside this script's repository root)

The output, nonfinite_ops.txt, has one line per tensor, `name count v1 v2 ...`, with values
written as Python writes floats (`nan`, `inf`, `-inf`, `-0.0`), which Rust's f32 parser reads
back exactly. Each case `<case>` has
  <case>.shape   the input's shape
  <case>.x       the input (row-major)
  <case>.c       the second operand, for binary ops (a constant of the graph, same shape as given)
  <case>.cshape  its shape
  <case>.p.<n>   the parameter `m.<n>` of the module (linear, conv, batch norm)
  <case>.y       PyTorch's forward output
  <case>.dy      the output gradient fed to backward
  <case>.dx      PyTorch's gradient of the input (`x.grad`), left out where the op has none here
Batch norm runs in training mode for `bn_train` (batch statistics) and evaluation mode for
`bn_eval`; every other case is the same in both modes.

The second output, nonfinite_quant.txt (same format), holds MASE's quantizer formulas written in
torch (`write_quantizers` below) on inputs with the same special values: `<case>.shape`, `<case>.x`
and `<case>.y` per format case.

torch runs on the CPU with one thread, so the files are the same on every run.
"""
import math
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
NAN, INF = math.nan, math.inf

# One row of the special values and a few ordinary ones around them.
SPECIAL = [NAN, INF, -INF, -0.0, 0.0, 1.5, -2.0, 7.0]


def t(values, shape):
    return torch.tensor(values, dtype=torch.float32).reshape(shape)


def fmt(v):
    return repr(float(v))


class Writer:
    def __init__(self):
        self.lines = []

    def tensor(self, name, x):
        vals = [fmt(v) for v in x.detach().reshape(-1).tolist()]
        self.lines.append(f"{name} {len(vals)} {' '.join(vals)}")

    def shape(self, name, shape):
        self.lines.append(f"{name} {len(shape)} {' '.join(str(float(s)) for s in shape)}")

    def case(self, name, x, f, c=None, params=None, grad=True):
        """Runs `f(x)` (or `f(x, c)`) with a deterministic output gradient and records it."""
        x = x.clone().requires_grad_(grad)
        y = f(x) if c is None else f(x, c)
        n = y.numel()
        dy = torch.tensor([0.5 + 0.25 * (i % 5) - (i % 2) for i in range(n)], dtype=torch.float32).reshape(y.shape)
        self.shape(f"{name}.shape", list(x.shape))
        self.tensor(f"{name}.x", x)
        if c is not None:
            self.shape(f"{name}.cshape", list(c.shape))
            self.tensor(f"{name}.c", c)
        for pname, p in (params or {}).items():
            self.tensor(f"{name}.p.{pname}", p)
        self.tensor(f"{name}.y", y)
        if grad:
            y.backward(dy)
            self.tensor(f"{name}.dy", dy)
            self.tensor(f"{name}.dx", x.grad)


def module_params(m):
    """Every parameter and buffer of `m` but `num_batches_tracked`, before it runs."""
    return {k: v.detach().clone() for k, v in m.state_dict().items() if k != "num_batches_tracked"}


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    w = Writer()
    x = t(SPECIAL * 2, [2, 8])

    # Pointwise activations.
    w.case("relu", x, torch.relu)
    w.case("relu6", x, F.relu6)
    w.case("leaky_relu", x, lambda v: F.leaky_relu(v, 0.1))
    w.case("sigmoid", x, torch.sigmoid)
    w.case("tanh", x, torch.tanh)
    w.case("selu", x, F.selu)
    w.case("gelu", x, F.gelu)
    w.case("gelu_tanh", x, lambda v: F.gelu(v, approximate="tanh"))
    w.case("sqrt", x, torch.sqrt)
    w.case("clip", x, lambda v: torch.clamp(v, -1.0, 1.0))
    w.case("clip_min", x, lambda v: torch.clamp(v, min=0.0))
    w.case("clip_max", x, lambda v: torch.clamp(v, max=0.0))
    # Values on the bounds: PyTorch 2.x passes no gradient there.
    bounds = t([-1.0, 1.0, 0.5, -1.5, 1.5, 0.0, 6.0, 7.0], [1, 8])
    w.case("clip_bounds", bounds, lambda v: torch.clamp(v, -1.0, 1.0))
    w.case("relu6_bounds", bounds, F.relu6)

    # Softmax over rows holding NaN, +inf, -inf, all -inf and two +inf.
    rows = t([NAN, 1, 2, INF, 1, 2, -INF, 1, 2, -INF, -INF, -INF, INF, INF, 1, 1, 2, 3, -0.0, 0.0, 0.0], [7, 3])
    w.case("softmax", rows, lambda v: torch.softmax(v, 1))
    w.case("log_softmax", rows, lambda v: torch.log_softmax(v, 1))

    # Pools over a 4x4 plane: the windows of the 2x2 pool hold a NaN, a +inf, only -inf, and
    # -0.0 beside 0.0.
    plane = t([NAN, 1, INF, 2, 3, 4, 5, 6, -INF, -INF, -0.0, 0.0, -INF, -INF, 0.0, -0.0], [1, 1, 4, 4])
    w.case("max_pool2d", plane, lambda v: F.max_pool2d(v, 2, 2))
    w.case("max_pool2d_k3_p1", plane, lambda v: F.max_pool2d(v, 3, 1, 1))
    w.case("max_pool1d", plane.reshape(1, 2, 8), lambda v: F.max_pool1d(v, 2, 2))
    w.case("avg_pool2d", plane, lambda v: F.avg_pool2d(v, 2, 2))
    w.case("avg_pool2d_k3_p1", plane, lambda v: F.avg_pool2d(v, 3, 1, 1))
    w.case("adaptive_avg_pool2d", plane, lambda v: F.adaptive_avg_pool2d(v, (3, 3)))

    # Batch norm: channel 0 holds a NaN, channel 1 a +inf, channel 2 is finite.
    bx = t([NAN, INF, 1, 2, 3, 4, 5, -6, 7, -0.0, 1, 2], [4, 3])
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    with torch.no_grad():
        bn.weight.copy_(t([1.5, -0.5, 2.0], [3]))
        bn.bias.copy_(t([0.1, 0.2, -0.3], [3]))
        bn.running_mean.copy_(t([0.5, -1.0, 2.0], [3]))
        bn.running_var.copy_(t([2.0, 0.5, 4.0], [3]))
    params = module_params(bn)
    bn.train()
    w.case("bn_train", bx, bn, params=params)
    bn.load_state_dict({**params, "num_batches_tracked": torch.tensor(0)})
    bn.eval()
    w.case("bn_eval", bx, bn, params=params)

    # Linear: a NaN in row 0, +inf in row 1 (times a zero weight gives NaN), -inf in row 2.
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(t([0.5, -1.0, 0.0, 2.0, 0.25, 1.0], [2, 3]))
        lin.bias.copy_(t([0.1, -0.2], [2]))
    lx = t([NAN, 1, 2, 3, 4, INF, 1, -INF, 0, 1, 2, 3], [4, 3])
    w.case("linear", lx, lin, params=module_params(lin))

    # Conv2d with padding: a NaN and a +inf reach the outputs whose windows cover them.
    conv = nn.Conv2d(1, 2, 3, 1, 1)
    with torch.no_grad():
        conv.weight.copy_(torch.linspace(-1, 1, 18).reshape(2, 1, 3, 3))
        conv.bias.copy_(t([0.5, -0.5], [2]))
    cx = t([0.0] * 25, [1, 1, 5, 5])
    cx[0, 0, 0, 0] = NAN
    cx[0, 0, 4, 4] = INF
    w.case("conv2d", cx, conv, params=module_params(conv))

    # Matrix product and elementwise ops against a constant operand.
    w.case("matmul", lx, torch.matmul, c=t([1, 0, 0, 1, 2, -1], [3, 2]))
    other = t([1, -INF, INF, 0.0, -0.0, NAN, 0.0, 2.0] * 2, [2, 8])
    w.case("add", x, torch.add, c=other)
    w.case("sub", x, torch.sub, c=other)
    w.case("mul", x, torch.mul, c=other)
    w.case("div", x, torch.div, c=other)
    w.case("pow", x, torch.pow, c=t([0.0, 2.0, 3.0, -1.0, 0.5, NAN, 0.0, 1.0] * 2, [2, 8]))
    w.case("add_broadcast", x, torch.add, c=t([NAN, 1, -INF, 0, 0, INF, 1, 1], [8]))

    # Padding and concatenation carry the values unchanged.
    w.case("pad", x, lambda v: F.pad(v, (1, 2), value=0.0))
    w.case("concat", x, lambda v, c: torch.cat([v, c], 1), c=other)

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "nonfinite_ops.txt"
    path.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {path} ({len(w.lines)} tensors)")
    quant_dir = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "crates/quant/tests/fixtures"
    write_quantizers(quant_dir)


# MASE's quantizers (doc/mase-semantics.md#quantizers) in torch, in MASE's order of operations,
# with its zero passthrough `(~is_close_to_0) * q + is_close_to_0 * x`, whose products make an
# infinite input NaN (0 * inf) and a close-to-zero input NaN where q is NaN.


def passthrough(q, x):
    close = torch.isclose(x.abs(), torch.tensor([0.0]))
    return (~close) * q + close * x


def integer(x, w, f, signed=True):
    lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if signed else (0, 2**w - 1)
    return torch.clamp(torch.round(x * 2**f), lo, hi) / 2**f


def minifloat_denorm(x, w, e_bits, bias=None):
    bias = 2 ** (e_bits - 1) - 1 if bias is None else bias
    e_max, e_min, m = 2**e_bits - 1 - bias, -bias, w - e_bits - 1
    sign, value = torch.sign(x + 1e-9), x.abs()
    e = torch.clamp(torch.ceil(torch.log2(value + 1e-9)), e_min, e_max)
    shift = 2**m
    mi = torch.clamp(torch.round(value / 2**e * shift), 0, shift - 1)
    return passthrough(sign * 2**e * (mi / shift), x)


def minifloat_ieee(x, w, e_bits, bias=None):
    """`bias` may be a tensor broadcasting against `x` (block_minifloat)."""
    bias = torch.tensor(2.0 ** (e_bits - 1) - 1) if bias is None else torch.as_tensor(bias, dtype=torch.float32)
    e_max, e_min, m = 2**e_bits - 1 - bias, -bias, w - e_bits - 1
    sign, value = torch.sign(x + 1e-9), x.abs()
    e = torch.clamp(torch.floor(torch.log2(value + 1e-9)), e_min, e_max)
    mant = value / 2**e
    shift = 2**m
    normal = 1 + torch.clamp(torch.round(mant * shift - shift), 0, shift - 1) / shift
    subnormal = torch.clamp(torch.round(mant * shift / 2), 0, shift - 1) / shift * 2
    return passthrough(sign * 2**e * torch.where(e != e_min, normal, subnormal), x)


def log_quant(x, w, bias=None):
    e_bits = w - 1
    bias = torch.tensor(2.0 ** (e_bits - 1) - 1) if bias is None else torch.as_tensor(bias, dtype=torch.float32)
    e_max, e_min = 2**e_bits - 1 - bias, -bias
    t = 2**e_min * 0.1
    sign, value = torch.sign(x + t), x.abs() + t
    return sign * 2 ** torch.clamp(torch.round(torch.log2(value)), e_min, e_max)


def block_max(x, b):
    """Rows of `x` ([N, F], skip_first_dim) cut into blocks of `b`: the per-block `max |x|`
    (NaN if the block holds one), broadcast back to `x`, with MASE's zero-block rule."""
    n, f = x.shape
    pmax = x.abs().reshape(n, f // b, b).amax(-1, keepdim=True)
    if torch.all(pmax == 0):
        pmax = torch.ones_like(pmax)
    else:
        pmax[pmax == 0] = pmax[pmax != 0].min()
    return pmax.expand(n, f // b, b).reshape(n, f)


def block_fp(x, w, e_bits, b):
    bias = 2 ** (e_bits - 1) - 1
    e = torch.clamp(torch.ceil(torch.log2(block_max(x, b))), -bias, 2**e_bits - 1 - bias)
    shift = 2 ** (w - 1)
    mi = torch.clamp(torch.round((x.abs() + 1e-9) / 2**e * shift), 0, shift - 1)
    return passthrough(torch.sign(x + 1e-9) * 2**e * (mi / shift), x)


def block_minifloat(x, w, e_bits, bias_bits, b):
    bias = torch.clamp(torch.floor(torch.log2(block_max(x, b))), 0, 2**bias_bits - 1)
    return minifloat_ieee(x, w, e_bits, bias)


def block_log(x, w, bias_bits, b):
    top = 2 ** (w - 1) - 1
    bias = torch.clamp(top - torch.ceil(torch.log2(block_max(x, b))), 0, 2**bias_bits - 1)
    return log_quant(x, w, bias)


def write_quantizers(out_dir):
    """nonfinite_quant.txt: `<case>.x`, `<case>.shape` and `<case>.y` per format case."""
    w = Writer()
    x = t(SPECIAL + [0.3, -0.05, 1e-9, -1e-9, 100.0, -100.0, 0.7, 3.0], [16])
    cases = {
        "integer_8_4": integer(x, 8, 4),
        "integer_u4_1": integer(x, 4, 1, signed=False),
        "minifloat_denorm_8_3": minifloat_denorm(x, 8, 3),
        "minifloat_ieee_8_4": minifloat_ieee(x, 8, 4),
        "minifloat_ieee_6_2_bias_1": minifloat_ieee(x, 6, 2, 1),
        "log_5": log_quant(x, 5),
    }
    for name, y in cases.items():
        w.shape(f"{name}.shape", list(x.shape))
        w.tensor(f"{name}.x", x)
        w.tensor(f"{name}.y", y)
    # Blocks of 4 along each row: a block with +inf, one with NaN, one with -inf and -0.0, one
    # finite, and a block of zeros beside blocks with a NaN (the smallest non-zero maximum is then
    # NaN, as torch's min gives).
    bx = t([1.5, INF, -0.5, 0.0, NAN, 1.0, 2.0, -3.0, -INF, 0.25, -0.0, 3.0, 0.5, 1.0, 2.0, 4.0], [2, 8])
    zx = t([0.0, 0.0, 0.0, 0.0, NAN, 1.0, -0.0, 2.0, 0.5, -1.0, 0.0, 0.25, 1.0, 2.0, 3.0, 4.0], [2, 8])
    blocks = {
        "block_fp_8_4": lambda v: block_fp(v, 8, 4, 4),
        "block_minifloat_8_3_2": lambda v: block_minifloat(v, 8, 3, 2, 4),
        "block_log_5_2": lambda v: block_log(v, 5, 2, 4),
    }
    for name, f in blocks.items():
        for suffix, v in (("", bx), ("_zero_block", zx)):
            w.shape(f"{name}{suffix}.shape", list(v.shape))
            w.tensor(f"{name}{suffix}.x", v)
            w.tensor(f"{name}{suffix}.y", f(v.clone()))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "nonfinite_quant.txt"
    path.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {path} ({len(w.lines)} tensors)")


if __name__ == "__main__":
    main()
