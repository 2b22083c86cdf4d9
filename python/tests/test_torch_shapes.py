"""Shapes and indexing traced from PyTorch: `x.size()`/`x.shape` and their entries, views with
computed shapes, subscripts of tensors (slices with steps, ints, None, ...), pieces of
`chunk`/`split`/`unbind`, `expand`, `repeat`, `stack`, `unsqueeze`, `cat` on a negative axis,
shufflenet's channel shuffle and ViT's class token. The traced graph equals PyTorch forward and
in a training step's gradients at two batch sizes, on the executor and with
`mase_rs.set_backend("torch")`; its ONNX export runs in onnxruntime with PyTorch's outputs."""

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn, F = torch.nn, torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, _native  # noqa: E402
from mase_rs.passes.graph import add_common_metadata_analysis_pass, init_metadata_analysis_pass  # noqa: E402
from helpers import assert_equals_pytorch_on_both_engines  # noqa: E402


def channel_shuffle(x, groups):
    """torchvision.models.shufflenetv2.channel_shuffle."""
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, num_channels, height, width)


class Shapes(nn.Module):
    """Every shape and indexing form once, around layers that have gradients to compare."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.token = nn.Parameter(torch.randn(1, 1, 5))
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        h = self.conv(x)
        x1, x2 = h.chunk(2, dim=1)
        h = torch.cat((x1, F.relu(x2)), dim=1)
        h = channel_shuffle(h, 2)
        n, c, hh, w = h.shape
        a, b = torch.split(h, [1, 3], dim=1)
        h = torch.cat([b, a], -3)
        parts = h.unbind(1)
        h = torch.stack([parts[0], parts[3] * parts[1]], dim=-1)  # [n, 5, 5, 2]
        h = h[..., 0] + h[:, 1:, ::1, 1].repeat(1, 1, 1)[:, ::2].sum() * 0.0 + h[:, :, :, None, 1].flatten(2)
        seq = h.reshape(n, hh * w // 5, 5)  # [n, 5, 5]
        cls = self.token.expand(n, -1, -1)
        seq = torch.cat([cls, seq], dim=1)
        seq = seq + seq.unsqueeze(0)[0] * 0.5
        return self.fc(seq[:, 0] + seq[:, -1])


def batch(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 5, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def test_every_form_traces_to_native_ops():
    nodes = json.loads(MaseGraph(model=Shapes())._native.graph_json())["nodes"]
    ops = {n["op"]["op"] for n in nodes}
    for want in ("size", "size_arith", "reshape", "index", "expand", "repeat", "stack", "concat", "transpose"):
        assert want in ops, (want, sorted(ops))
    assert "opaque" not in ops


@pytest.mark.parametrize("n", [2, 7])
def test_forward_and_gradients_equal_pytorch_at_any_batch_size(n):
    torch.manual_seed(0)
    user = Shapes().eval()
    x, y = batch(n)
    assert_equals_pytorch_on_both_engines(user, x, y)


class Exportable(nn.Module):
    """The forms the ONNX export writes, a class token expanded to the batch size (read from the
    input's shape at run time) among them."""

    def __init__(self):
        super().__init__()
        self.class_token = nn.Parameter(torch.linspace(-1.0, 1.0, 3).view(1, 3))

    def forward(self, x):
        h = channel_shuffle(x, 2)
        a, b = h.chunk(2, dim=1)
        h = torch.stack([a[:, :, 1::2], b[..., 1:3, :]], dim=2)  # [n, 2, 2, 2, 5]
        h = h[:, 0, :, None].repeat(1, 1, 2, 1, 1) + h[:, 1].unsqueeze(2).expand(-1, -1, 2, -1, -1)
        return torch.cat([self.class_token.expand(x.size(0), -1), h.flatten(1)], dim=1)


def test_onnx_export_runs_in_onnxruntime_with_pytorchs_outputs(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    user = Exportable().eval()
    mg = MaseGraph(model=user)
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(2, 4, 4, 5)}, "add_value": False})
    ckpt, path = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    mg.save(ckpt)
    assert _native.ch_main(["ch", "export", "--load", str(ckpt), "-o", str(path)]) == 0
    x = torch.randn(3, 4, 4, 5, generator=torch.Generator().manual_seed(3))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_array_equal(got, user(x).detach().numpy())


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda x: x.view(x.size()), r"x\.size\(\) is used whole by view"),
        (lambda x: torch.cat(x.chunk(2, 1)), r"chunk\(\.\.\.\) is used whole by cat"),
        (lambda x: x[x > 0], "subscript getitem|subscript gt"),
        (lambda x: x[:, x.size(1) - 1], "subscript sub"),
    ],
)
def test_forms_mase_rs_lacks_are_refused_in_one_line(call, words):
    class M(nn.Module):
        def forward(self, x):
            return call(x)

    with pytest.raises(ValueError, match=words):
        MaseGraph(model=M())


def onnx_model(nodes, inits, x_shape):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *x_shape])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize(
    "label,node,consts",
    [
        ("Slice with axes and steps", ("Slice", ["x", "s", "e", "a", "st"]), {"s": [1, -1], "e": [9, 2**62], "a": [3, 1], "st": [2, 1]}),
        ("Slice of every axis, negative end", ("Slice", ["x", "s", "e"]), {"s": [0, 0, 1, 0], "e": [2**62, 1, -1, 3]}),
        ("Tile", ("Tile", ["x", "r"]), {"r": [1, 2, 1, 3]}),
        ("Expand two ways", ("Expand", ["x", "shape"]), {"shape": [2, 1, 1, 1, 4]}),
    ],
)
def test_onnx_operators_import_with_onnxruntimes_outputs(tmp_path, label, node, consts):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    from onnx import helper, numpy_helper, save

    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in consts.items()]
    path = tmp_path / "op.onnx"
    x_shape = [2, 3, 4] if node[0] != "Expand" else [2, 1, 1]
    save(onnx_model([helper.make_node(node[0], node[1], ["y"])], inits, x_shape), str(path))
    x = np.random.default_rng(5).standard_normal((5, *x_shape)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    mg = MaseGraph(model=str(path))
    mg.model.eval()
    np.testing.assert_array_equal(mg(x), want, err_msg=label)


class Small(nn.Module):
    """One form per case (`form(m, x)`), with parameters whose gradients are compared."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.v = nn.Parameter(torch.randn(6))
        self.w = nn.Parameter(torch.randn(5, 6))
        self.b = nn.Parameter(torch.randn(5))
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.form(self, x)


def _pieces(x):
    a, b = x.split(4, -1)
    return torch.cat([b, a], -1)


def _sections(x):
    a, b = torch.split(x, [2, 4], dim=-1)
    return torch.cat([b, a], -1)


# Each case: a label and the form, on x of shape [n, 4, 1, 6].
SMALL_FORMS = [
    ("squeeze(2)", lambda m, x: m.fc(x.squeeze(2))),
    ("squeeze of a dimension larger than 1 keeps it", lambda m, x: m.fc(x.squeeze(-1).squeeze(-2))),
    ("squeeze()", lambda m, x: m.fc(x.squeeze())),
    ("torch.squeeze of two dimensions", lambda m, x: m.fc(torch.squeeze(x, (1, 2)))),
    ("matrix @ vector", lambda m, x: x.squeeze(2) @ m.v),
    ("vector @ batched matrix", lambda m, x: torch.matmul(m.v, x.squeeze(2).transpose(1, 2))),
    ("F.linear with the module's own tensors", lambda m, x: F.linear(x.squeeze(2), m.w, m.b)),
    ("F.linear with a tied weight", lambda m, x: F.linear(x.squeeze(2), m.fc.weight)),
    ("F.linear with a vector weight", lambda m, x: F.linear(x.squeeze(2), m.v)),
    ("split into pieces of 4", lambda m, x: m.fc(_pieces(x).squeeze(2))),
    ("split into sizes [2, 4]", lambda m, x: m.fc(_sections(x)[:, :, 0])),
]


@pytest.mark.parametrize("label,form", SMALL_FORMS, ids=[c[0] for c in SMALL_FORMS])
def test_small_forms_are_native_and_equal_pytorch(label, form):
    torch.manual_seed(0)
    user = Small(form)
    ops = {n["op"]["op"] for n in json.loads(MaseGraph(model=copy.deepcopy(user))._native.graph_json())["nodes"]}
    assert "opaque" not in ops, label
    for n in (2, 3):
        x = torch.randn(n, 4, 1, 6, generator=torch.Generator().manual_seed(n))
        want = user(x)
        g = torch.randn(want.shape, generator=torch.Generator().manual_seed(7))
        user.zero_grad()
        (want * g).sum().backward()
        grads_t = {k: p.grad.clone() for k, p in user.named_parameters() if p.grad is not None}
        for backend in ("rust", "torch"):
            mg = MaseGraph(model=copy.deepcopy(user))
            mase_rs.set_backend(backend)
            got = mg.model(x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"{label}, {backend}")
            mg.model.zero_grad()
            (got * g).sum().backward()
            grads = {k: p.grad for k, p in mg.model.named_parameters() if p.grad is not None}
            assert grads.keys() == grads_t.keys(), (label, backend)
            for k in grads:
                torch.testing.assert_close(grads[k], grads_t[k], rtol=1e-5, atol=1e-5, msg=f"{label}, {backend}: {k}")
            mase_rs.set_backend("rust")


@pytest.mark.parametrize(
    "form,words",
    [
        (lambda m, x: torch.split(x, [2, 3], dim=-1)[0], r"split sizes \[2, 3\] must add up to the size 6 of dimension 3"),
        (lambda m, x: x.split(4, -1)[2], r"split\(4\) of dimension 3 with size 6 gives 2 pieces; there is no piece 2"),
    ],
)
def test_splits_pytorch_refuses_are_refused_when_the_size_is_known(form, words):
    x = torch.randn(2, 4, 1, 6)
    with pytest.raises(Exception):
        form(None, x)  # PyTorch refuses them too.
    with pytest.raises(ValueError, match=words):
        MaseGraph(model=Small(form))(x.numpy())
