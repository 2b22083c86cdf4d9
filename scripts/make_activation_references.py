"""Writes PyTorch's forward values and gradients for the activations silu, hardswish,
hardsigmoid, softplus and mish, and for the reductions mean, sum and amax.

usage: python3 scripts/make_activation_references.py [OUT_DIR]
       (OUT_DIR defaults to crates/runtime/tests/fixtures beside this script's repository root)

The output, activation_ops.txt, has the format and keys of nonfinite_ops.txt (see
make_nonfinite_references.py, whose writer this script uses): per case `<case>.shape`, `.x`,
`.y`, `.dy` and `.dx`.

The activations run on one row of NaN, +inf, -inf, -0.0 and 0.0, the kinks of hardswish and
hardsigmoid (±3), values around softplus's thresholds (20 by default, 5 for beta = 2: beta * x
crosses it between 2.5 and 7), large magnitudes (±30, ±100, where exp overflows or underflows)
and ordinary values. The reductions run on a [2, 3, 4] tensor whose rows hold a NaN, a +inf beside
a -inf, only -inf, -0.0 beside 0.0, a tie of two maxima, and ordinary values (halves, so that sums
are exact in any order).

torch runs on the CPU with one thread, so the file is the same on every run.
"""
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_nonfinite_references import Writer, t  # noqa: E402

torch.set_num_threads(1)
NAN, INF = math.nan, math.inf

ROW = [NAN, INF, -INF, -0.0, 0.0, 1.5, -2.0, 7.0, 3.0, -3.0, 2.9, -2.9, 0.5, 2.5, 20.0, 20.5, -20.0, 25.0, 30.0, -30.0, 100.0, -100.0]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    w = Writer()
    x = t(ROW, [2, len(ROW) // 2])
    w.case("silu", x, F.silu)
    w.case("hardswish", x, F.hardswish)
    w.case("hardsigmoid", x, F.hardsigmoid)
    w.case("softplus", x, F.softplus)
    w.case("softplus_beta2_threshold5", x, lambda v: F.softplus(v, beta=2.0, threshold=5.0))
    w.case("mish", x, F.mish)

    # Rows of 4 along the last dimension: NaN; +inf and -inf; only -inf; -0.0 and 0.0 (and 0.0
    # then -0.0); a tie of two maxima; ordinary values.
    r = t(
        [NAN, 1, 2, 3]
        + [INF, -INF, 1, 2]
        + [-INF, -INF, -INF, -INF]
        + [-0.0, 0.0, -1, -2]
        + [0.0, -0.0, -1, -2]
        + [1.5, 2.5, 2.5, -0.5]
        + [0.5, -1.5, 3, 2]
        + [4, 4, 4, 4]
        + [-0.0, -0.5, -1, -1.5]
        + [1, 2, 3, 4]
        + [-2, 0.5, 1, 8]
        + [0.25, 0.75, -3, 6],
        [3, 4, 4],
    )
    w.case("mean_dims_1_2", r, lambda v: v.mean(dim=(1, 2)))
    w.case("mean_last_keepdim", r, lambda v: torch.mean(v, [-1], keepdim=True))
    w.case("mean_all", r, lambda v: v.mean())
    w.case("sum_dim_1", r, lambda v: v.sum(1))
    w.case("sum_dims_0_2_keepdim", r, lambda v: v.sum(dim=(0, 2), keepdim=True))
    w.case("sum_all", r, lambda v: v.sum())
    w.case("amax_last", r, lambda v: v.amax(dim=-1))
    w.case("amax_dims_0_2_keepdim", r, lambda v: v.amax(dim=(0, 2), keepdim=True))
    w.case("amax_dim_1", r, lambda v: torch.amax(v, 1))
    # Every element of the finite rows.
    finite = r.reshape(12, 4)[5:].clone()
    w.case("mean_all_finite", finite, lambda v: v.mean())
    w.case("sum_all_finite", finite, lambda v: torch.sum(v))
    w.case("amax_all_finite", finite, lambda v: v.amax())

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "activation_ops.txt"
    path.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {path} ({len(w.lines)} tensors)")


if __name__ == "__main__":
    main()
