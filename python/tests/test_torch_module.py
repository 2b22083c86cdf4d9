"""`mg.model` as a real PyTorch module: lab 4's module surgery, torch training loops, passes seen
by the module tree and module edits seen by the passes, the Rust and PyTorch engines agreeing."""

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn = torch.nn
F = torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, get_dataset_info, get_model  # noqa: E402
from mase_rs.passes.graph import (  # noqa: E402
    add_common_metadata_analysis_pass,
    init_metadata_analysis_pass,
    quantize_transform_pass,
)
from mase_rs.passes.graph.utils import get_mase_op, get_module_by_name, get_parent_name  # noqa: E402
from conftest import ch_command  # noqa: E402


class JSC_Three_Linear_Layers(nn.Module):
    """The network of lab 4 (its write-up's definition)."""

    def __init__(self):
        super(JSC_Three_Linear_Layers, self).__init__()
        self.seq_blocks = nn.Sequential(
            nn.BatchNorm1d(16),  # 0
            nn.ReLU(16),  # 1
            nn.Linear(16, 16),  # linear seq_2
            nn.ReLU(16),  # 3
            nn.Linear(16, 16),  # linear seq_4
            nn.ReLU(16),  # 5
            nn.Linear(16, 5),  # linear seq_6
            nn.ReLU(5),  # 7
        )

    def forward(self, x):
        return self.seq_blocks(x)


# Lab 4's pass, as its write-up has it (only the import of get_parent_name changed).
def instantiate_linear(in_features, out_features, bias):
    if bias is not None:
        bias = True
    return nn.Linear(in_features=in_features, out_features=out_features, bias=bias)


def redefine_linear_transform_pass(graph, pass_args=None):
    main_config = pass_args.pop("config")
    default = main_config.pop("default", None)
    if default is None:
        raise ValueError("default value must be provided.")
    i = 0
    for node in graph.fx_graph.nodes:
        i += 1
        # if node name is not matched, it won't be tracked
        config = main_config.get(node.name, default)["config"]
        name = config.get("name", None)
        if name is not None:
            ori_module = graph.modules[node.target]
            in_features = ori_module.in_features
            out_features = ori_module.out_features
            bias = ori_module.bias
            if name == "output_only":
                out_features = out_features * config["channel_multiplier"]
            elif name == "both":
                in_features = in_features * config["channel_multiplier"]
                out_features = out_features * config["channel_multiplier"]
            elif name == "input_only":
                in_features = in_features * config["channel_multiplier"]
            new_module = instantiate_linear(in_features, out_features, bias)
            parent_name, name = get_parent_name(node.target)
            setattr(graph.modules[parent_name], name, new_module)
    return graph, {}


def lab4_pass_config():
    return {
        "by": "name",
        "default": {"config": {"name": None}},
        "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 2}},
        "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": 2}},
        "seq_blocks_6": {"config": {"name": "input_only", "channel_multiplier": 2}},
    }


class _FxStandIn:
    """What MASE's `MaseGraph` gives the lab's pass (`fx_graph`, `modules`) over a plain
    `torch.fx` trace: the reference for what the pass does in MASE."""

    def __init__(self, module):
        # MASE builds `fx.GraphModule(model, graph)` from its tracer's graph.
        self.model = torch.fx.GraphModule(module, torch.fx.Tracer().trace(module))
        self.fx_graph = self.model.graph

    @property
    def modules(self):
        return dict(self.model.named_modules())


def jsc_batch(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return x, y


def train_loop(model, x, y, steps=30, lr=1e-2):
    """A plain PyTorch training loop: Adam, cross-entropy, gradient clipping, a scheduler."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    model.train()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def test_lab4_write_up_pass_runs_unchanged():
    torch.manual_seed(0)
    user = JSC_Three_Linear_Layers()
    reference = _FxStandIn(copy.deepcopy(user))
    redefine_linear_transform_pass(graph=reference, pass_args={"config": lab4_pass_config()})
    mg = MaseGraph(model=user)
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(8, 16)}, "add_value": False})
    mg, _ = redefine_linear_transform_pass(graph=mg, pass_args={"config": lab4_pass_config()})
    # The module tree MASE's GraphModule prints after the same pass.
    assert str(mg.model) == str(reference.model)
    layers = [line.strip() for line in str(mg.model).splitlines() if "Linear(" in line]
    assert layers == [
        "(2): Linear(in_features=16, out_features=32, bias=True)",
        "(4): Linear(in_features=32, out_features=32, bias=True)",
        "(6): Linear(in_features=32, out_features=5, bias=True)",
    ]
    count = sum(p.numel() for p in mg.model.parameters() if p.requires_grad)
    assert count == sum(p.numel() for p in reference.model.parameters() if p.requires_grad) == 1797
    # The graph sees the new layers: its nodes, its weights and a forward on the executor.
    widths = [(n.module["in_features"], n.module["out_features"]) for n in mg.nodes if n.module and n.module["op"] == "linear"]
    assert widths == [(16, 32), (32, 32), (32, 5)]
    assert mg.state_dict()["seq_blocks.4.weight"].shape == (32, 32)
    x, y = jsc_batch()
    # The new layers drew their own initial weights; with the reference's, both compute the same.
    mg.model.load_state_dict(reference.model.state_dict())
    torch.testing.assert_close(mg.model.eval()(x), reference.model.eval()(x), rtol=1e-5, atol=1e-6)
    # A plain PyTorch loop trains the result, on the Rust executor.
    losses = train_loop(mg.model, x, y)
    assert losses[-1] < 0.7 * losses[0]
    # The weights trained in the loop are the graph's.
    w = mg.modules["seq_blocks.4"].weight.detach().numpy()
    np.testing.assert_array_equal(mg.state_dict()["seq_blocks.4.weight"].numpy(), w)


def test_mase_rs_channel_multiplier_is_seen_by_the_module_tree():
    # mase-rs's own pass derives each input width from its producer (README: multipliers 2 and 4).
    mg = MaseGraph(model=JSC_Three_Linear_Layers())
    model = mg.model
    args = {
        "by": "name",
        "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 2}},
        "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": 4}},
        "seq_blocks_6": {"config": {"name": "input_only"}},
    }
    mg, _ = mase_rs.channel_multiplier_transform_pass(mg, args)
    assert mg.model is model
    layers = [line.strip() for line in str(mg.model).splitlines() if "Linear(" in line]
    assert layers == [
        "(2): Linear(in_features=16, out_features=32, bias=True)",
        "(4): Linear(in_features=32, out_features=64, bias=True)",
        "(6): Linear(in_features=64, out_features=5, bias=True)",
    ]
    assert sum(p.numel() for p in mg.model.parameters() if p.requires_grad) == 3013
    x, y = jsc_batch()
    losses = train_loop(mg.model, x, y, steps=60)
    assert losses[-1] < 0.8 * losses[0]


def test_module_helpers_at_mase_paths():
    mg = MaseGraph(model=JSC_Three_Linear_Layers())
    assert get_parent_name("seq_blocks.2") == ("seq_blocks", "2")
    assert get_module_by_name(mg.model, "seq_blocks.2") is mg.modules["seq_blocks.2"]
    assert get_module_by_name(mg.model, "nope") is None
    for node in mg.fx_graph.nodes:
        if node.op == "call_module":
            assert isinstance(mg.modules[node.target], nn.Module)
    assert [n.name for n in mg.model.graph.nodes] == [n.name for n in mg.fx_graph.nodes]
    # A traced module's submodules are the user's own objects.
    user = JSC_Three_Linear_Layers()
    mg = MaseGraph(model=user)
    assert mg.modules["seq_blocks.2"] is user.seq_blocks[2]


def test_zoo_model_is_a_module_built_from_the_graph():
    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))
    assert isinstance(mg.model, torch.fx.GraphModule) and isinstance(mg.model, nn.Module)
    kinds = {type(m).__name__ for m in mg.model.modules()}
    assert {"BatchNorm1d", "Linear", "ReLU"} <= kinds
    state = mg.state_dict()
    for name, p in mg.model.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), state[name])


def grads_of(mg, x, y):
    mg.model.zero_grad()
    F.cross_entropy(mg.model(x), y).backward()
    return {n: p.grad.clone() for n, p in mg.model.named_parameters()}


@pytest.mark.parametrize("model", ["jsc-tiny", "jsc-toy", "jsc-three-linear"])
def test_rust_gradients_equal_pytorch(model):
    mg = MaseGraph(model=get_model(model, "cls", get_dataset_info("jsc")))
    mg.model.train()
    x, y = jsc_batch(32)
    other = copy.deepcopy(mg)
    rust = grads_of(mg, x, y)
    mase_rs.set_backend("torch")
    torch_grads = grads_of(other, x, y)
    assert rust.keys() == torch_grads.keys()
    for name in rust:
        torch.testing.assert_close(rust[name], torch_grads[name], rtol=1e-5, atol=1e-5, msg=name)
    # Batch norm's running statistics moved the same way on both engines.
    a, b = dict(mg.model.named_buffers()), dict(other.model.named_buffers())
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)


def test_train_and_eval_mode_follow_the_module():
    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))
    x, _ = jsc_batch(16)
    mg.model.eval()
    a = mg.model(x)
    mg.model.train()
    b = mg.model(x)
    assert not torch.allclose(a, b)
    mg.model.eval()
    torch.testing.assert_close(mg.model(x), torch.from_numpy(mg(x.numpy())))
    # A module traced in eval mode stays in eval mode.
    user = JSC_Three_Linear_Layers().eval()
    mg = MaseGraph(model=user)
    assert mg.model.training is False
    torch.testing.assert_close(mg.model(x), user(x), rtol=1e-5, atol=1e-6)


def test_a_mase_rs_pass_changes_the_module_tree():
    mg = MaseGraph(model=JSC_Three_Linear_Layers())
    model = mg.model
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(8, 16)}, "add_value": False})
    fmt = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4,
           "bias_width": 8, "bias_frac_width": 4}
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": fmt}})
    assert mg.model is model
    assert type(mg.modules["seq_blocks.2"]).__name__ == "LinearInteger"
    assert mg.modules["seq_blocks.2"].config["weight_width"] == 8
    assert [get_mase_op(n) for n in mg.fx_graph.nodes if n.op == "call_module"][:3] == ["batch_norm1d", "relu", "linear"]


def test_torch_backend_equals_rust_forward():
    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))
    x, _ = jsc_batch(16)
    mg.model.eval()
    rust = mg.model(x)
    mase_rs.set_backend("torch")
    torch.testing.assert_close(mg.model(x), rust, rtol=1e-5, atol=1e-6)


def test_backward_needs_its_own_forward():
    mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
    x, y = jsc_batch(8)
    first = F.cross_entropy(mg.model(x), y)
    mg.model(x)
    with pytest.raises(RuntimeError, match="last forward only"):
        first.backward()
    # A backward through an eval-mode forward: PyTorch runs that forward, with the same result.
    mg.model.eval()
    mg.model.zero_grad()
    F.cross_entropy(mg.model(x), y).backward()
    grads = {n: p.grad.clone() for n, p in mg.model.named_parameters()}
    mase_rs.set_backend("torch")
    mg.model.zero_grad()
    F.cross_entropy(mg.model(x), y).backward()
    for n, p in mg.model.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=0, atol=0, msg=n)
    with torch.no_grad():
        mase_rs.set_backend("rust")
        torch.testing.assert_close(mg.model(x), torch.from_numpy(mg(x.numpy())))


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq_blocks = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))

    def forward(self, x):
        return self.seq_blocks(x)


Q84 = {"data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}


def test_round_trip_trace_quantize_swap_train_export_emit(tmp_path):
    from mase_rs import _native
    from mase_rs.nn.quantized.modules import LinearInteger

    torch.manual_seed(0)
    mg = MaseGraph(model=TwoLayer())
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(8, 16)}, "add_value": False})
    # 1. A mase-rs pass: both linears become LinearInteger in the module tree.
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": {"name": "integer", **Q84}}})
    assert [type(mg.modules[t]).__name__ for t in ("seq_blocks.0", "seq_blocks.2")] == ["LinearInteger", "LinearInteger"]
    # 2. A module swapped by hand, made as MASE makes it: the graph takes its formats.
    parent, name = get_parent_name("seq_blocks.2")
    setattr(mg.modules[parent], name, LinearInteger(32, 5, config={**Q84, "weight_width": 6, "weight_frac_width": 3}))
    node = next(n for n in mg.nodes if n.name == "seq_blocks_2")
    weight = json.loads(mg._native.graph_json())["nodes"][[n.name for n in mg.nodes].index("seq_blocks_2")]["quant"]["weight"]
    assert weight == {"name": "integer", "width": 6, "frac_width": 3, "signed": True}
    assert node.module["out_features"] == 5
    # 3. A plain PyTorch loop trains it, through the fake quantization on the executor.
    x, y = jsc_batch(128)
    losses = train_loop(mg.model, x, y, steps=40)
    assert losses[-1] < 0.8 * losses[0]
    mg.model.eval()
    expected = mg.model(x).detach().numpy()
    # 4. Export and emit see all of it: the QONNX file computes what the module computes.
    ckpt, onnx_file, rtl = tmp_path / "m.ckpt", tmp_path / "m.onnx", tmp_path / "rtl"
    mg.save(ckpt)
    assert _native.ch_main(["ch", "export", "--load", str(ckpt), "--format", "qonnx", "-o", str(onnx_file)]) == 0
    back = MaseGraph(model=str(onnx_file))
    back.model.eval()
    np.testing.assert_allclose(back(x.numpy()), expected, rtol=1e-5, atol=1e-5)
    assert _native.ch_main(["ch", "emit", "--load", str(ckpt), "-o", str(rtl)]) == 0
    manifest = json.loads((rtl / "manifest.json").read_text())
    assert "seq_blocks_2" in json.dumps(manifest)


def test_lightning_trainer_fits_mg_model(tmp_path):
    L = pytest.importorskip("lightning", reason="SKIP: lightning is not installed")
    from torch.utils.data import DataLoader, TensorDataset

    class Lit(L.LightningModule):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.model(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))
    x, y = jsc_batch(256)
    mg.model.eval()
    with torch.no_grad():
        before = F.cross_entropy(mg.model(x), y).item()
    # Lightning keeps the train/eval mode the module had.
    mg.model.train()
    trainer = L.Trainer(
        max_epochs=4, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path,
    )
    trainer.fit(Lit(mg.model), DataLoader(TensorDataset(x, y), batch_size=32))
    mg.model.eval()
    with torch.no_grad():
        assert F.cross_entropy(mg.model(x), y).item() < 0.8 * before
    # What Lightning trained is the graph's: the executor's forward gives the module's outputs.
    np.testing.assert_allclose(mg(x.numpy()), mg.model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_moving_the_module_keeps_the_weights_both_ways():
    # float64 stands in for another device: PyTorch runs it; moving back hands the graph the new values.
    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))
    x, y = jsc_batch(64)
    model = mg.model.double()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.train()
    F.cross_entropy(model(x.double()), y).backward()
    opt.step()
    trained = {k: v.float().clone() for k, v in model.state_dict().items()}
    model.float().eval()
    for name, value in mg.state_dict().items():
        torch.testing.assert_close(torch.as_tensor(value), trained[name], rtol=0, atol=0, msg=name)
    with torch.no_grad():
        rust = model(x)
        mase_rs.set_backend("torch")
        torch.testing.assert_close(rust, model(x), rtol=1e-5, atol=1e-6)


def _toy():
    return MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc")))


def _view_equals_graph(mg):
    state = mg.state_dict()
    for name, t in mg.model.state_dict().items():
        if name in state:
            np.testing.assert_array_equal(t.detach().numpy(), np.asarray(state[name]), err_msg=name)


def test_every_pairing_of_edits_reaches_the_other_view():
    x, y = jsc_batch(64)
    # mase-rs trains (fit): the module holds the new weights.
    mg = _toy()
    model = mg.model
    mg.fit((x.numpy(), y.numpy()), epochs=2, batch_size=16, lr=1e-2)
    assert mg.model is model
    _view_equals_graph(mg)
    # mase-rs loads a state dict: the module holds it.
    state = {k: np.full_like(v, 0.5) for k, v in mg.state_dict().items()}
    mg.load_state_dict(state)
    assert mg.modules["seq_blocks.2"].weight[0, 0].item() == 0.5
    # The module loads a state dict: the graph holds it.
    model.load_state_dict({k: torch.full_like(v, 0.25) if v.is_floating_point() else v for k, v in model.state_dict().items()})
    assert float(mg.state_dict()["seq_blocks.2.weight"][0, 0]) == 0.25
    # fold_batch_norm (a mase-rs pass) removes batch norms from the module tree, outputs unchanged.
    mg = _toy()
    mg.model.eval()
    with torch.no_grad():
        before = mg.model(x)
    mg, _ = mase_rs.fold_batch_norm_transform_pass(mg, {})
    # The three after a linear fold into it; the first, with nothing before it, stays.
    kinds = [type(m).__name__ for m in mg.model.modules()]
    assert kinds == ["GraphModule", "Module", "BatchNorm1d", "ReLU", "Linear", "ReLU", "Linear", "ReLU", "Linear", "ReLU"]
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), before, rtol=1e-4, atol=1e-5)
    # A module swapped by hand, then quantized by mase-rs: the new module is the one quantized.
    mg = _toy()
    parent, name = get_parent_name("seq_blocks.2")
    setattr(mg.modules[parent], name, nn.Linear(16, 8))
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": {"name": "integer", **Q84}}})
    assert type(mg.modules["seq_blocks.2"]).__name__ == "LinearInteger"
    _view_equals_graph(mg)


class Scale(nn.Module):
    """A user's own module, with an op mase-rs lacks (`torch.sin`)."""

    def __init__(self, n):
        super().__init__()
        self.gain = nn.Parameter(torch.full((n,), 1.5))

    def forward(self, x):
        return x * self.gain + torch.sin(x)


class WithOwnModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq_blocks = nn.Sequential(nn.Linear(16, 8), Scale(8), nn.ReLU(), nn.Linear(8, 5))

    def forward(self, x):
        return self.seq_blocks(x)


def test_modules_the_graph_cannot_lower_stay_pytorch_modules(tmp_path):
    import subprocess

    torch.manual_seed(0)
    user = WithOwnModule()
    mg = MaseGraph(model=user)
    # The module stays whole; a forward run measured its output shape.
    node = next(n for n in mg.nodes if n.name == "seq_blocks_1")
    assert node.module == {"op": "opaque", "class": "Scale", "sample_shape": [8]}
    assert mg.modules["seq_blocks.1"] is user.seq_blocks[1]
    # Analyses see its shapes.
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.randn(4, 16)}, "add_value": False})
    assert node.meta["mase"]["common"]["results"]["data_out_0"]["shape"] == [4, 8]
    # PyTorch runs it, forward and backward, with the rest of the graph.
    x, y = jsc_batch(64)
    torch.testing.assert_close(mg.model(x), user(x))
    np.testing.assert_allclose(mg(x.numpy()), user(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    losses = train_loop(mg.model, x, y, steps=40)
    assert losses[-1] < 0.8 * losses[0]
    assert not torch.equal(user.seq_blocks[1].gain, torch.full((8,), 1.5))
    np.testing.assert_array_equal(mg.state_dict()["seq_blocks.1.gain"].numpy(), user.seq_blocks[1].gain.detach().numpy())
    # Quantize leaves it in float; export and emit name it in one line.
    q = {"name": "integer", **Q84}
    mg, _ = quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": q}})
    assert type(mg.modules["seq_blocks.1"]) is Scale
    assert type(mg.modules["seq_blocks.0"]).__name__ == "LinearInteger"
    ckpt = tmp_path / "m.ckpt"
    mg.save(ckpt)
    for args in (["export", "--load", str(ckpt), "--format", "qonnx", "-o", str(tmp_path / "m.onnx")], ["emit", "--load", str(ckpt), "-o", str(tmp_path / "rtl")]):
        r = subprocess.run([*ch_command(), *args], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode != 0
        line = r.stderr.strip().splitlines()[-1]
        assert "seq_blocks_1" in line and ("Scale" in line or "opaque" in line), line


def test_stochastic_depth_is_a_native_op_on_both_engines():
    from mase_rs.nn.stochastic_depth import StochasticDepth

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8), StochasticDepth(0.5, "row"), nn.ReLU()).eval()
    mg = MaseGraph(model=model)
    ops = [r["op"]["op"] for r in json.loads(mg._native.view_records())]
    assert ops == ["input", "linear", "stochastic_depth", "relu", "output"]
    assert type(mg.modules["1"]) is StochasticDepth
    x = torch.randn(64, 16)
    # Identity in eval: the linear's sums as PyTorch's to float32 rounding (PyTorch's CPU GEMM
    # sums in another order on some CPUs, so the bits may differ by an ulp).
    with torch.no_grad():
        np.testing.assert_allclose(mg.model(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    # In training, each sample is kept and doubled (p = 0.5) or zeroed, on either engine.
    linear = torch.relu(model[0](x)).detach()
    mg.model.train()
    for backend in ("rust", "torch"):
        mase_rs.set_backend(backend)
        with torch.no_grad():
            y = mg.model(x)
        kept = [bool(r.abs().sum() > 0) for r in y]
        assert 10 < sum(kept) < 54, backend
        for row, keep, ref in zip(y, kept, linear):
            torch.testing.assert_close(row, ref * 2 if keep else torch.zeros_like(ref), rtol=1e-6, atol=1e-6)
