"""Activations and reductions traced from PyTorch: SiLU, Hardswish, Hardsigmoid, Softplus, Mish,
GELU, Sigmoid and Tanh in their module, function and tensor-method forms, and mean/sum/amax over
dimensions and over every element. The traced graph equals PyTorch forward and in a training
step's gradients, on the executor and with `mase_rs.set_backend("torch")`; its ONNX export runs
in onnxruntime with PyTorch's outputs, and ONNX files using the operators directly import with
onnxruntime's outputs."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn, F = torch.nn, torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, _native  # noqa: E402
from mase_rs.passes.graph import add_common_metadata_analysis_pass, init_metadata_analysis_pass, quantize_transform_pass  # noqa: E402
from helpers import assert_equals_pytorch_on_both_engines  # noqa: E402


class Acts(nn.Module):
    """Every new op once, and GELU, Sigmoid and Tanh in each of their forms."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.silu, self.hsig, self.mish = nn.SiLU(), nn.Hardsigmoid(), nn.Mish()
        self.hswish, self.softplus = nn.Hardswish(), nn.Softplus(beta=2.0, threshold=3.0)
        self.gelu, self.sigmoid, self.tanh = nn.GELU(), nn.Sigmoid(), nn.Tanh()
        self.fc = nn.Linear(4, 3)
        # The export test turns GELU off: its tanh form has no ONNX operator at opset 13, and its
        # exact form is exported with Erf, which the importer does not read back.
        self.gelu_form = "tanh"

    def forward(self, x):
        h = self.silu(self.conv(x))
        h = F.hardswish(h) + self.hswish(h) * self.hsig(h) + F.hardsigmoid(h) + F.silu(h)
        a = h.mean(dim=(2, 3))
        b = torch.mean(h, [-1], keepdim=True).sum(2).flatten(1)
        c = h.amax(dim=-1).amax(-1) + torch.amax(h, (2, 3))
        d = torch.sum(h, dim=3).sum(-1) + h.mean(3, True).amax(2).flatten(1)
        z = a + b + c + 0.1 * d
        z = self.softplus(z) + F.softplus(z) + self.mish(z) + F.mish(z)
        z = self.gelu(z) + (F.gelu(z, approximate=self.gelu_form) if self.gelu_form else z) + self.sigmoid(z) + torch.sigmoid(z) + z.sigmoid() + F.sigmoid(z)
        z = self.tanh(z) + torch.tanh(z) + z.tanh() + F.tanh(z)
        y = self.fc(z)
        return y + 0.01 * y.sum() - 0.01 * torch.mean(y)


def batch(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 2 * torch.randn(n, 3, 5, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def test_every_form_traces_to_the_mase_ops():
    nodes = json.loads(MaseGraph(model=Acts())._native.graph_json())["nodes"]
    mase_ops = {n["op"]["op"] for n in nodes}
    for want in ("silu", "hardswish", "hardsigmoid", "softplus", "mish", "mean", "sum", "amax", "gelu", "sigmoid", "tanh"):
        assert want in mase_ops, (want, sorted(mase_ops))


def test_forward_and_training_gradients_equal_pytorch_on_both_engines():
    torch.manual_seed(0)
    user = Acts()
    x, y = batch()
    user.eval()
    assert_equals_pytorch_on_both_engines(user, x, y)


def test_onnx_export_runs_in_onnxruntime_with_pytorchs_outputs(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    torch.manual_seed(1)
    # ONNX's softplus has no threshold: exported softplus keeps PyTorch's default of 20.
    user = Acts().eval()
    user.softplus, user.gelu, user.gelu_form = nn.Softplus(beta=2.0), nn.Identity(), None
    mg = MaseGraph(model=user)
    # The metadata gives the export the input's shape.
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(2, 3, 5, 5)}, "add_value": False})
    ckpt, path = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    mg.save(ckpt)
    assert _native.ch_main(["ch", "export", "--load", str(ckpt), "-o", str(path)]) == 0
    x, _ = batch(7, seed=3)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, user(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    back = MaseGraph(model=str(path))
    back.model.eval()
    np.testing.assert_allclose(back(x.numpy()), got, rtol=1e-5, atol=1e-5)


def onnx_model(nodes, inits, opset, x_shape):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *x_shape])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize(
    "label,opset,make",
    [
        ("HardSwish opset 14", 14, lambda h: [h.make_node("HardSwish", ["x"], ["y"])]),
        ("HardSigmoid as PyTorch", 13, lambda h: [h.make_node("HardSigmoid", ["x"], ["y"], alpha=1 / 6, beta=0.5)]),
        ("Softplus", 13, lambda h: [h.make_node("Softplus", ["x"], ["y"])]),
        ("Mish opset 18", 18, lambda h: [h.make_node("Mish", ["x"], ["y"])]),
        ("ReduceMean axes attribute", 13, lambda h: [h.make_node("ReduceMean", ["x"], ["y"], axes=[2, -1], keepdims=0)]),
        ("ReduceMean axes input", 18, lambda h: [h.make_node("ReduceMean", ["x", "axes"], ["y"])]),
        ("ReduceSum axes input", 13, lambda h: [h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)]),
        ("ReduceSum no axes, noop", 13, lambda h: [h.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)]),
        ("ReduceMax axes attribute", 13, lambda h: [h.make_node("ReduceMax", ["x"], ["y"], axes=[1])]),
        ("ReduceMax axes input", 18, lambda h: [h.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=0)]),
    ],
)
def test_onnx_operators_import_with_onnxruntimes_outputs(tmp_path, label, opset, make):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    from onnx import helper, numpy_helper, save

    axes = numpy_helper.from_array(np.array([1, 3], np.int64), "axes")
    nodes = make(helper)
    inits = [axes] if "axes" in nodes[0].input else []
    path = tmp_path / "op.onnx"
    save(onnx_model(nodes, inits, opset, [2, 3, 4]), str(path))
    x = (4 * np.random.default_rng(5).standard_normal((5, 2, 3, 4))).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    mg = MaseGraph(model=str(path))
    mg.model.eval()
    np.testing.assert_allclose(mg(x), want, rtol=1e-5, atol=1e-6, err_msg=label)


def test_onnx_hard_sigmoid_with_other_constants_is_refused_in_one_line(tmp_path):
    pytest.importorskip("onnx", reason="SKIP: onnx is not installed")
    from onnx import helper, save

    path = tmp_path / "op.onnx"
    save(onnx_model([helper.make_node("HardSigmoid", ["x"], ["y"])], [], 13, [4]), str(path))
    with pytest.raises(ValueError, match=r"HardSigmoid with alpha 0\.2 and beta 0\.5 \(not PyTorch's 1/6 and 1/2\) is not supported"):
        MaseGraph(model=str(path))


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda x: x.mean(dim=1, dtype=torch.float64), "dtype and out are not supported"),
        (lambda x: x.sum(dim=1.5), "dim 1.5 is neither an int, a list of ints nor None"),
    ],
)
def test_reductions_mase_rs_lacks_are_listed(call, words):
    class M(nn.Module):
        def forward(self, x):
            return call(x)

    with pytest.raises(ValueError, match=words):
        MaseGraph(model=M())



def test_quantized_activations_and_reductions_agree_on_both_engines():
    torch.manual_seed(2)
    mg = MaseGraph(model=Acts().eval())
    mg.model.eval()
    fmt = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}
    by_type = {op: {"config": fmt} for op in ("silu", "hardswish", "hardsigmoid", "softplus", "mish", "mean", "sum", "amax")}
    x, _ = batch(seed=4)
    before = mg.model(x)
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, **by_type})
    rust = mg.model(x)
    # The inputs of those ops now go through 8-bit fixed point.
    assert not torch.allclose(rust, before, rtol=1e-4, atol=1e-4)
    mase_rs.set_backend("torch")
    torch.testing.assert_close(mg.model(x), rust, rtol=1e-5, atol=1e-5)
    nodes = json.loads(mg._native.graph_json())["nodes"]
    quantized = sorted({n["op"]["op"] for n in nodes if n.get("quant")})
    assert quantized == sorted(by_type), quantized
