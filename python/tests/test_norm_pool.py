"""Layer norm, group norm and pools with `ceil_mode`, padding and `count_include_pad`, traced
from PyTorch: each lowers to a native op, and the graph equals the module forward and in a
training step's gradients (on the executor and with `mase_rs.set_backend("torch")`), and its
ONNX export runs in onnxruntime and imports back with the same outputs.

Skipped with one line when torch is missing, except under CI=true, where torch is required."""

import json
import os
import subprocess

import numpy as np
import pytest

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    if os.environ.get("CI") == "true":
        pytest.fail("torch is required under CI=true (scripts/python-tests.sh installs it)", pytrace=False)
    pytest.skip("torch is not installed: the torch tests are skipped", allow_module_level=True)

import mase_rs
from mase_rs import DatasetInfo, MaseGraph
from mase_rs.passes.graph.utils import get_mase_op
from conftest import ch_command  # noqa: E402


class LayerNorm2d(nn.LayerNorm):
    """ConvNeXt's channel LayerNorm of `[N, C, H, W]` (torchvision's `LayerNorm2d`): a subclass
    that fx traces through into permute, `F.layer_norm` with the module's weight and bias, permute."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Block(nn.Module):
    """A squeezenet-style stem (`MaxPool2d(3, 2, ceil_mode=True)` on an odd size), a
    ConvNeXt-style block (depthwise conv, LayerNorm over channels after a permute, MLP), group
    norms as modules and functions, average pools with `ceil_mode` and
    `count_include_pad=False`, and a global adaptive max pool. Input `[N, 3, 9, 9]`."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.norm = nn.LayerNorm(8, eps=1e-6)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)
        self.norm2d = LayerNorm2d(8, eps=1e-6)
        self.avg = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        self.gn_weight = nn.Parameter(1 + 0.3 * torch.randn(8))
        self.gn_bias = nn.Parameter(0.1 * torch.randn(8))
        self.amax = nn.AdaptiveMaxPool2d(1)
        self.ln = nn.LayerNorm(32, bias=False)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.gn(self.conv(x))))  # [N, 8, 4, 4]
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.down(torch.tanh(self.up(self.norm(y))))
        x = x + y.permute(0, 3, 1, 2)
        x = self.avg(self.norm2d(x))  # [N, 8, 3, 3]
        top = torch.flatten(self.amax(x), 1)  # [N, 8]
        x = F.avg_pool1d(torch.flatten(x, 2), 2, ceil_mode=True)  # [N, 8, 5]
        x = F.group_norm(x, 4, self.gn_weight, self.gn_bias)
        x = F.max_pool1d(x, 2, 2, ceil_mode=True)  # [N, 8, 3]
        return self.fc(self.ln(torch.cat([torch.flatten(x, 1), top], 1)))


SHAPE = (3, 9, 9)


def make():
    torch.manual_seed(0)
    m = Block()
    with torch.no_grad():
        # Affine terms away from ones and zeros, so that a dropped weight or bias shows.
        for name, p in m.named_parameters():
            if "norm" in name or name.startswith(("gn.", "ln.")):
                p.add_(0.3 * torch.randn(p.shape))
    return m


def batch(n=6, seed=1):
    return torch.randn(n, *SHAPE, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def graph(module):
    return MaseGraph(model=module, dataset_info=DatasetInfo(name="test", num_classes=5, sample_shape=SHAPE))


def test_every_node_is_a_native_op():
    mg = graph(make())
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": np.zeros((2, *SHAPE), np.float32)}, "add_value": False})
    ops = [get_mase_op(n) for n in mg.nodes]
    assert "opaque" not in ops
    for op in ("group_norm", "layer_norm", "max_pool2d", "avg_pool2d", "avg_pool1d", "max_pool1d", "adaptive_max_pool2d", "permute"):
        assert op in ops, (op, ops)
    by_name = {n["name"]: n["op"] for n in json.loads(mg._native.graph_json())["nodes"]}
    assert by_name["pool"]["ceil_mode"] is True
    assert by_name["avg"]["count_include_pad"] is False
    assert by_name["layer_norm"] == {"op": "layer_norm", "normalized_shape": [8], "eps": 1e-6, "elementwise_affine": False, "bias": False}
    assert by_name["ln"]["bias"] is False


def test_forward_and_training_gradients_equal_pytorch():
    module = make()
    mg = graph(make())
    x, y = batch(), torch.arange(6) % 5
    module.eval()
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.as_tensor(mg(x.numpy())), module(x).detach(), rtol=1e-5, atol=1e-5)

    def step(m):
        m.train()
        m.zero_grad()
        F.cross_entropy(m(x), y).backward()
        return {n: p.grad.clone() for n, p in m.named_parameters()}

    want = step(module)
    for backend in ("rust", "torch"):
        mase_rs.set_backend(backend)
        got = step(mg.model)
        assert got.keys() == want.keys(), backend
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-5, msg=f"{backend}: gradient of {name}")


def test_nan_and_inf_propagate_as_in_pytorch():
    module = make().eval()
    mg = graph(make())
    mg.model.eval()
    x = batch(2)
    x[0, 0, 0, 0] = float("nan")
    x[1, 1, 4, 4] = float("inf")
    want = module(x).detach()
    got = torch.as_tensor(mg(x.numpy()))
    assert want.isnan().any()
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_onnx_export_runs_in_onnxruntime_and_imports_back(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    mg = graph(make())
    mg.model.eval()
    x = batch().numpy()
    want = mg(x)
    ckpt, onnx = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    # The input's metadata gives the export its sample shape.
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": x[:2]}, "add_value": False})
    mg.save(ckpt)
    r = subprocess.run([*ch_command(), "export", "--load", str(ckpt), "-o", str(onnx)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    back = MaseGraph(model=onnx)
    back.model.eval()
    np.testing.assert_allclose(back(x), want, rtol=1e-5, atol=1e-5)
