"""Comparisons, `torch.where`, `masked_fill` and the logical not of a mask, traced from PyTorch:
native graph ops (`eq`, `ne`, `lt`, `le`, `gt`, `ge`, `where`) whose values are PyTorch's bools
as 0.0 and 1.0. The traced graph equals PyTorch forward and in a training step's gradients, on
the executor and with `mase_rs.set_backend("torch")`; its ONNX export runs in onnxruntime with
PyTorch's outputs; ONNX files with `Equal`, `Less`, `Greater`, `Not`, `Where` and casts to bool
import with onnxruntime's outputs."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn, F = torch.nn, torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, _native  # noqa: E402
from mase_rs.passes.graph import add_common_metadata_analysis_pass, init_metadata_analysis_pass  # noqa: E402
from helpers import assert_equals_pytorch_on_both_engines  # noqa: E402


class Gates(nn.Module):
    """Every traced form once, between layers whose gradients are compared."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.register_buffer("keep", torch.tensor([True, False, True, True, False, True]))
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        h = self.fc(x)
        h = torch.where(h > 0, h, 0.1 * h)
        p = torch.softmax(h.masked_fill(~self.keep, float("-inf")), dim=-1)
        h = h * (h >= h.mean(-1, keepdim=True)) + p
        h = h + torch.where(torch.ne(x, 0.5), x, 1.0) - x.lt(0.0) * 2.0
        h = h + torch.logical_not(h <= 0.25) + (x == x) + torch.greater_equal(h, x) * x
        h = torch.where(~(x > 1.5), h, x)
        return self.out(h)


def batch(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def test_every_form_traces_to_native_ops():
    nodes = json.loads(MaseGraph(model=Gates())._native.graph_json())["nodes"]
    ops = [n["op"]["op"] for n in nodes]
    for want in ("eq", "ne", "lt", "le", "gt", "ge", "where"):
        assert want in ops, (want, ops)
    assert "opaque" not in ops
    by_name = {n["name"]: n for n in nodes}
    # `masked_fill(mask, -inf)` is `where(mask, -inf, h)` (fx folds `~self.keep` of the buffer
    # into a constant); `~(x > 1.5)` is `(x > 1.5) == 0`.
    fill = by_name["masked_fill"]
    assert fill["op"]["op"] == "where"
    assert [nodes[i]["op"]["op"] for i in fill["inputs"]] == ["constant", "constant", "where"]
    invert = by_name["invert"]
    assert invert["op"]["op"] == "eq"
    assert [nodes[i]["op"]["op"] for i in invert["inputs"]] == ["gt", "constant"]


@pytest.mark.parametrize("n", [2, 7])
def test_forward_and_gradients_equal_pytorch(n):
    torch.manual_seed(0)
    user = Gates().eval()
    x, y = batch(n)
    x[0, 1] = 0.5  # the `ne` and `where` branch taken both ways
    assert_equals_pytorch_on_both_engines(user, x, y)


def test_nan_compares_and_selects_as_in_pytorch():
    class M(nn.Module):
        def forward(self, x):
            return torch.where(x != x, -1.0, x) + (x > 0) + torch.where(x >= 1.0, x, 0.0)

    x = torch.tensor([[float("nan"), 2.0, -float("inf"), float("inf"), 0.0, -0.0]])
    want = M()(x)
    for backend in ("rust", "torch"):
        mase_rs.set_backend(backend)
        got = MaseGraph(model=M()).model(x)
        assert torch.equal(got, want), (backend, got, want)


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda x: ~x.long(), "not known to be a bool tensor|long"),
        (lambda x: torch.where(x > 0), r"torch\.where\(condition\)"),
        (lambda x: x + (x.size(0) > 1), "comparison of sizes"),
    ],
)
def test_forms_mase_rs_lacks_are_refused_in_one_line(call, words):
    class M(nn.Module):
        def forward(self, x):
            return call(x)

    with pytest.raises(ValueError, match=words):
        MaseGraph(model=M())


def test_onnx_export_runs_in_onnxruntime_with_pytorchs_outputs(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    torch.manual_seed(1)
    user = Gates().eval()
    mg = MaseGraph(model=user)
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(2, 6)}, "add_value": False})
    ckpt, path = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    mg.save(ckpt)
    assert _native.ch_main(["ch", "export", "--load", str(ckpt), "-o", str(path)]) == 0
    x, _ = batch(5, seed=3)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, user(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def onnx_model(nodes, inits, x_shape):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *x_shape])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_onnx_comparisons_and_where_import_with_onnxruntimes_outputs(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    from onnx import TensorProto, helper, numpy_helper, save

    node = helper.make_node
    nodes = [
        node("Greater", ["x", "c"], ["gt"]),
        node("Mul", ["x", "tenth"], ["small"]),
        node("Where", ["gt", "x", "small"], ["leaky"]),
        node("Cast", ["x"], ["nonzero"], to=TensorProto.BOOL),
        node("Not", ["nonzero"], ["zero"]),
        node("Where", ["zero", "c", "leaky"], ["filled"]),
        node("LessOrEqual", ["filled", "c"], ["le"]),
        node("Less", ["x", "c"], ["lt"]),
        node("GreaterOrEqual", ["x", "c"], ["ge"]),
        node("Equal", ["x", "c"], ["eq"]),
        node("Cast", ["le"], ["le_f"], to=TensorProto.FLOAT),
        node("Cast", ["lt"], ["lt_f"], to=TensorProto.FLOAT),
        node("Cast", ["ge"], ["ge_f"], to=TensorProto.FLOAT),
        node("Cast", ["eq"], ["eq_f"], to=TensorProto.FLOAT),
        node("Add", ["filled", "le_f"], ["s1"]),
        node("Add", ["s1", "lt_f"], ["s2"]),
        node("Add", ["s2", "ge_f"], ["s3"]),
        node("Add", ["s3", "eq_f"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([0.0, 0.5, -0.5, 0.25], np.float32), "c"),
        numpy_helper.from_array(np.array(0.1, np.float32), "tenth"),
    ]
    path = tmp_path / "logic.onnx"
    save(onnx_model(nodes, inits, [4]), str(path))
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    x[0] = [0.0, 0.5, -0.0, 0.25]  # zeros for Not, ties for the comparisons
    x[1, 0] = np.nan
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    mg = MaseGraph(model=str(path))
    mg.model.eval()
    np.testing.assert_array_equal(mg(x), want)


def test_a_comparison_is_a_bool_mask_of_scaled_dot_product_attention():
    class M(nn.Module):
        def forward(self, x):
            mask = x[:, :, :4] > -0.5
            return F.scaled_dot_product_attention(x, x, x, attn_mask=mask).sum(1)

    x = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(2))
    mg = MaseGraph(model=M())
    ops = [n["op"] for n in json.loads(mg._native.graph_json())["nodes"]]
    assert [o.get("mask") for o in ops if o["op"] == "scaled_dot_product_attention"] == ["bool"]
    for backend in ("rust", "torch"):
        mase_rs.set_backend(backend)
        torch.testing.assert_close(MaseGraph(model=M()).model(x), M()(x), rtol=1e-5, atol=1e-6, msg=backend)
