"""Writes PyTorch's forward values and gradients for the shape and indexing ops: subscripts of
tensors, pieces of chunk/split/unbind, expand, repeat, stack, cat on a negative axis, flatten of
a range, and shufflenet's channel shuffle.

usage: python3 scripts/make_shape_references.py [OUT_DIR]
       (OUT_DIR defaults to crates/runtime/tests/fixtures beside this script's repository root)

The output, shape_ops.txt, has the format and keys of nonfinite_ops.txt (see
make_nonfinite_references.py, whose writer this script uses): per case `<case>.shape`, `.x`,
`.y`, `.dy` and `.dx`. Every input is 0, 1, 2, ... in row-major order with NaN, +inf, -inf and
-0.0 in its first four places, so each output value names the input value it came from, and the
special values show that they move unchanged.

torch runs on the CPU with one thread, so the file is the same on every run.
"""
import math
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_nonfinite_references import Writer  # noqa: E402

torch.set_num_threads(1)


def ramp(*shape):
    n = math.prod(shape)
    v = [float(i) for i in range(n)]
    v[: min(4, n)] = [math.nan, math.inf, -math.inf, -0.0][: min(4, n)]
    return torch.tensor(v, dtype=torch.float32).reshape(shape)


def channel_shuffle(x, groups):
    """torchvision.models.shufflenetv2.channel_shuffle."""
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, num_channels, height, width)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    w = Writer()
    w.case("select_1", ramp(2, 3, 4), lambda v: v[:, 0])
    w.case("slice_step_new_axis", ramp(2, 3, 5), lambda v: v[..., 1::2, None])
    w.case("slice_negative", ramp(2, 4, 7), lambda v: v[:, -3:-1, ::3])
    w.case("select_last_ellipsis", ramp(2, 3, 4), lambda v: v[..., -1])
    w.case("chunk_2_dim_1_piece_1", ramp(2, 5, 2), lambda v: v.chunk(2, dim=1)[1])
    w.case("chunk_3_last_piece_2", ramp(2, 3, 7), lambda v: torch.chunk(v, 3, -1)[2])
    w.case("split_sizes_piece_1", ramp(2, 4, 3), lambda v: v.split([1, 3], dim=1)[1])
    w.case("split_2_piece_1", ramp(5, 3), lambda v: torch.split(v, 2)[1])
    w.case("unbind_last_2", ramp(2, 3, 4), lambda v: v.unbind(-1)[2])
    w.case("expand", ramp(3, 1, 2), lambda v: v.expand(2, -1, 4, -1))
    w.case("repeat", ramp(2, 3), lambda v: v.repeat(2, 1, 3))
    w.case("stack_last", ramp(2, 3), lambda v: torch.stack([v, v * 1], dim=-1))
    w.case("stack_0", ramp(2, 3), lambda v: torch.stack([v, v, v]))
    w.case("cat_negative", ramp(2, 3, 2), lambda v: torch.cat([v, v], dim=-2))
    w.case("flatten_1_2", ramp(2, 3, 4, 2), lambda v: v.flatten(1, 2))
    w.case("channel_shuffle", ramp(2, 4, 2, 3), lambda v: channel_shuffle(v, 2))

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "shape_ops.txt"
    path.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {path} ({len(w.lines)} tensors)")


if __name__ == "__main__":
    main()
