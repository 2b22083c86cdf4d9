"""Models with several inputs or outputs: `MaseGraph(model=m)` of a `forward(self, a, b)` and of
a forward returning a tuple equals PyTorch (`mg(a, b)` and `mg.model(a, b)`), trains with
PyTorch's gradients to every input and parameter through the autograd bridge, and takes the
metadata passes and `quantize_transform_pass`."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn = torch.nn

import mase_rs  # noqa: E402
from mase_rs import MaseGraph  # noqa: E402
from mase_rs.passes.graph import (  # noqa: E402
    add_common_metadata_analysis_pass,
    add_software_metadata_analysis_pass,
    quantize_transform_pass,
)

Q84 = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}


class AddMatmul(nn.Module):
    """Two inputs: a layer of one added to the other, and a product of the two."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, a, b):
        h = torch.relu(self.fc(a) + b)
        return torch.matmul(h.unsqueeze(2), b.unsqueeze(1)).flatten(1)


class Siamese(nn.Module):
    """One encoder on both inputs (shared weights), the squared distance of the codes."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3))

    def forward(self, a, b):
        d = self.enc(a) - self.enc(b)
        return (d * d).sum(dim=1)


class LogitsFeatures(nn.Module):
    """One input, a tuple out: the features are returned and read by the head."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        f = torch.relu(self.body(x))
        return self.head(f), f


class Unused(nn.Module):
    """A second input the forward never reads (torch.fx keeps its placeholder)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, a, b):
        return self.fc(a)


CASES = [
    # (what, module factory, input shapes (batch 3), inputs and outputs of the graph)
    ("add and matmul", AddMatmul, [(3, 4), (3, 3)], (2, 1)),
    ("siamese", Siamese, [(3, 5), (3, 5)], (2, 1)),
    ("logits and features", LogitsFeatures, [(3, 5)], (1, 2)),
    ("unused input", Unused, [(3, 4), (3, 7)], (2, 1)),
]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _build(make, shapes):
    torch.manual_seed(0)
    module = make().eval()
    xs = [torch.randn(*s) for s in shapes]
    return module, MaseGraph(model=module), xs


@pytest.mark.parametrize("what,make,shapes,counts", CASES, ids=[c[0] for c in CASES])
def test_forward_equals_pytorch(what, make, shapes, counts):
    module, mg, xs = _build(make, shapes)
    assert mg._native.io_counts == counts
    with torch.no_grad():
        want = _as_tuple(module(*xs))
        got_model = _as_tuple(mg.model.eval()(*xs))
    got_numpy = _as_tuple(mg(*[x.numpy() for x in xs]))
    assert len(got_model) == len(got_numpy) == len(want)
    for w, gm, gn in zip(want, got_model, got_numpy):
        torch.testing.assert_close(gm, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gn, w.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["rust", "torch"])
@pytest.mark.parametrize("what,make,shapes,counts", CASES, ids=[c[0] for c in CASES])
def test_gradients_to_every_input_and_parameter_equal_pytorch(what, make, shapes, counts, backend):
    module, mg, xs = _build(make, shapes)
    weights = [torch.randn(o.shape) for o in _as_tuple(module(*xs))]
    grads = []
    mase_rs.set_backend(backend)
    try:
        for m in (mg.model, module):
            m.train()
            m.zero_grad()
            leaves = [x.clone().requires_grad_(True) for x in xs]
            loss = sum((o * w).sum() for o, w in zip(_as_tuple(m(*leaves)), weights))
            loss.backward()
            grads.append(([x.grad for x in leaves], {n: p.grad for n, p in m.named_parameters()}))
    finally:
        mase_rs.set_backend("rust")
    (ours_x, ours_p), (want_x, want_p) = grads
    for k, (g, w) in enumerate(zip(ours_x, want_x)):
        if w is None:
            # PyTorch gives an input nothing reads no gradient; so does the bridge.
            assert g is None, f"input {k}"
        else:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=f"input {k}")
    assert set(ours_p) == set(want_p)
    for name, w in want_p.items():
        torch.testing.assert_close(ours_p[name], w, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("what,make,shapes,counts", CASES, ids=[c[0] for c in CASES])
def test_metadata_and_quantize(what, make, shapes, counts):
    module, mg, xs = _build(make, shapes)
    names = [n.target for n in mg.nodes if n.op == "placeholder"]
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": dict(zip(names, xs))})
    mg, _ = add_software_metadata_analysis_pass(mg)
    for name, x in zip(names, xs):
        assert mg._node(name).meta["mase"]["common"]["results"]["data_out_0"]["shape"] == list(x.shape)
    out = mg._node("output").meta["mase"]["common"]["args"]
    assert sorted(out) == [f"data_in_{k}" for k in range(counts[1])]
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": Q84}})
    kinds = {n: type(m).__name__ for n, m in mg.model.named_modules()}
    assert "LinearInteger" in kinds.values(), kinds
    with torch.no_grad():
        got = _as_tuple(mg.model.eval()(*xs))
    assert len(got) == counts[1] and all(torch.isfinite(g).all() for g in got)


def test_wrong_argument_counts_are_one_line_errors():
    _, mg, xs = _build(AddMatmul, [(3, 4), (3, 3)])
    cases = [
        (lambda: mg(xs[0].numpy()), "MaseGraph: the model takes 2 input(s) (a, b), got 1"),
        (lambda: mg(a=xs[0].numpy(), c=xs[1].numpy()), "MaseGraph: the model's inputs are a, b; unknown c; missing b"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == message
    # By name, in any order.
    np.testing.assert_array_equal(mg(b=xs[1].numpy(), a=xs[0].numpy()), mg(xs[0].numpy(), xs[1].numpy()))
