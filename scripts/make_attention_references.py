"""Writes PyTorch's forward values and gradients for einsum, matmul, scaled_dot_product_attention
and embedding.

usage: python3 scripts/make_attention_references.py [OUT_DIR]
       (OUT_DIR defaults to crates/runtime/tests/fixtures beside this script's repository root)

The output, attention_ops.txt, holds one tensor a line (`name count v1 v2 ...`, the format of
nonfinite_ops.txt). Per case: `<case>.shape<i>` and `<case>.in<i>` for each input (input 0 is
the graph's input, the others are constants of the graph), `.y`, the output gradient `.dy`, and
`.d<i>`, PyTorch's gradient of input i, for each input that has one. An embedding module's weight
is `<case>.p.weight` and its gradient `<case>.dp.weight`.

Inputs are drawn from N(0, 1) with torch.manual_seed(0) (and exact small integers for ids), so
the file is the same on every run; torch runs on the CPU with one thread. Cases cover the
attention forms of einsum, a transposed output, an implicit output; attention with and without
masks (bool with a fully masked row, float with -inf entries and a gradient, causal with as many
and with more keys than queries), a given scale, and a NaN in the query; embedding with a padding
row and repeated ids, as a module and as a function.
"""
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def fmt(v):
    return repr(float(v))


class Writer:
    def __init__(self):
        self.lines = []

    def tensor(self, name, x):
        vals = [fmt(v) for v in x.detach().reshape(-1).tolist()]
        self.lines.append(f"{name} {len(vals)} {' '.join(vals)}")

    def case(self, name, f, inputs, grads, params=None):
        """Runs `f(*inputs)` and records its values; `grads[i]` says whether input i gets a gradient."""
        ins = [x.clone().requires_grad_(g) for x, g in zip(inputs, grads)]
        y = f(*ins)
        n = y.numel()
        dy = torch.tensor([0.5 + 0.25 * (i % 5) - (i % 2) for i in range(n)], dtype=torch.float32).reshape(y.shape)
        for i, x in enumerate(ins):
            self.lines.append(f"{name}.shape{i} {x.dim()} {' '.join(str(float(s)) for s in x.shape)}")
            self.tensor(f"{name}.in{i}", x)
        for pname, p in (params or {}).items():
            self.tensor(f"{name}.p.{pname}", p)
        self.tensor(f"{name}.y", y)
        y.backward(dy)
        self.tensor(f"{name}.dy", dy)
        for i, x in enumerate(ins):
            if grads[i]:
                self.tensor(f"{name}.d{i}", x.grad)
        for pname, p in (params or {}).items():
            self.tensor(f"{name}.dp.{pname}", p.grad)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/runtime/tests/fixtures"
    torch.manual_seed(0)
    r = torch.randn
    w = Writer()
    both = [True, True]

    def einsum(eq):
        return lambda a, b: torch.einsum(eq, a, b)

    w.case("einsum_bhqd_bhkd", einsum("bhqd,bhkd->bhqk"), [r(2, 2, 3, 4), r(2, 2, 5, 4)], both)
    w.case("einsum_bhqk_bhkd", einsum("bhqk,bhkd->bhqd"), [r(2, 2, 3, 5), r(2, 2, 5, 4)], both)
    w.case("einsum_bij_bjk", einsum("bij,bjk->bik"), [r(3, 2, 4), r(3, 4, 5)], both)
    w.case("einsum_bqd_kd_to_bkq", einsum("bqd,kd->bkq"), [r(2, 3, 4), r(5, 4)], both)
    w.case("einsum_implicit_ij_jk", einsum("ij,jk"), [r(3, 4), r(4, 2)], both)
    w.case("einsum_outer_bi_bj", einsum("bi,bj->bij"), [r(2, 3), r(2, 4)], both)
    w.case("matmul_4d_by_2d", torch.matmul, [r(2, 2, 3, 4), r(4, 5)], both)
    w.case("bmm", torch.bmm, [r(3, 2, 4), r(3, 4, 5)], both)

    sdpa = F.scaled_dot_product_attention
    qkv = [True, True, True]
    w.case("sdpa", sdpa, [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 3)], qkv)
    w.case("sdpa_causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), [r(2, 4, 4), r(2, 4, 4), r(2, 4, 3)], qkv)
    w.case("sdpa_causal_more_keys", lambda q, k, v: sdpa(q, k, v, is_causal=True), [r(2, 3, 4), r(2, 5, 4), r(2, 5, 2)], qkv)
    w.case("sdpa_scale", lambda q, k, v: sdpa(q, k, v, scale=0.3), [r(2, 3, 4), r(2, 5, 4), r(2, 5, 2)], qkv)
    # A bool mask (held as 0.0 / 1.0 in the graph) whose row 1 masks every key.
    keep = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    w.case(
        "sdpa_bool_mask",
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m.bool()),
        [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 3), keep],
        [True, True, True, False],
    )
    # A float mask broadcast over the heads, with -inf entries, and its gradient.
    fm = r(2, 1, 3, 5)
    fm[0, 0, 1, 2] = -math.inf
    fm[1, 0, 0, 0] = -math.inf
    w.case("sdpa_float_mask", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 3), fm], [True] * 4)
    q = r(2, 3, 4)
    q[0, 1, 2] = math.nan
    w.case("sdpa_nan_query", sdpa, [q, r(2, 5, 4), r(2, 5, 2)], qkv)

    ids = torch.tensor([[1, 3, 0, 3], [5, 3, 1, 2]], dtype=torch.float32)
    emb = torch.nn.Embedding(6, 3, padding_idx=3)
    weight = emb.weight.detach().clone().requires_grad_(True)
    w.case(
        "embedding_module_padding",
        lambda x: F.embedding(x.long(), weight, padding_idx=3),
        [ids],
        [False],
        params={"weight": weight},
    )
    w.case("embedding_function", lambda x, wt: F.embedding(x.long(), wt), [ids, r(6, 3)], [False, True])
    # Vector operands of torch.matmul (a row on the left, a column on the right).
    w.case("matmul_vector_by_3d", torch.matmul, [r(4), r(2, 4, 5)], both)
    w.case("matmul_3d_by_vector", torch.matmul, [r(2, 3, 4), r(4)], both)

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "attention_ops.txt"
    path.write_text("\n".join(w.lines) + "\n")
    print(f"wrote {path} ({len(w.lines)} tensors)")


if __name__ == "__main__":
    main()
