"""torch: tracing nn.Modules (the zoo's models written in PyTorch), torch tensors in and out,
training here and loading the weights back into torch, and bad modules' one-line errors.

Skipped with one line when torch is missing, except under CI=true, where torch is required."""

import copy
import os

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
from mase_rs.passes.graph.utils import get_mase_op, get_node_actual_target
import pytorch_ref
from pytorch_ref import zoo_module

# (zoo model, sample shape, classes, trainable parameters the zoo's description gives)
ZOO = [
    ("jsc-tiny", (16,), 5, 117),
    ("jsc-toy", (16,), 5, 327),
    ("jsc-s", (16,), 5, 5615),
    ("jsc-three-linear", (16,), 5, 661),
    ("jsc-three-layer", (16,), 5, 4389),
    ("toy", (1, 2, 2), 2, 130),
    ("toy_tiny", (1, 2, 2), 2, 10),
    ("mlp", (1, 8, 8), 10, 4810),
    ("tfc", (1, 28, 28), 10, 59594),
    ("mnist-cnn", (1, 28, 28), 10, 9098),
    ("vgg7", (3, 32, 32), 10, 14029450),
]


def info(shape, classes):
    return DatasetInfo(name="test", num_classes=classes, sample_shape=tuple(shape))


def randomize_buffers(module, seed):
    """Non-trivial batch-norm statistics, so that eval outputs depend on them."""
    g = torch.Generator().manual_seed(seed)
    for name, buf in module.named_buffers():
        if name.endswith("running_mean"):
            buf.copy_(torch.randn(buf.shape, generator=g) * 0.3)
        elif name.endswith("running_var"):
            buf.copy_(torch.rand(buf.shape, generator=g) + 0.5)


def trainable_count(mg):
    return sum(v.size for k, v in mg._native.state_dict().items() if not k.endswith(("running_mean", "running_var")))


@pytest.mark.parametrize("name,shape,classes,params", ZOO, ids=[z[0] for z in ZOO])
def test_zoo_models_written_in_pytorch_trace_to_the_zoo_graph(name, shape, classes, params):
    torch.manual_seed(0)
    module = zoo_module(name, shape, classes)
    randomize_buffers(module, 1)
    mg = MaseGraph(model=module, dataset_info=info(shape, classes))
    zoo = MaseGraph(model=mase_rs.get_model(name, "cls", info(shape, classes)))
    # The zoo's node names, fx ops, targets and parameters.
    assert [(n.name, n.op, n.target) for n in mg.nodes] == [(n.name, n.op, n.target) for n in zoo.nodes]
    assert trainable_count(mg) == trainable_count(zoo) == params
    zoo_sd = zoo.state_dict()
    assert {k: v.shape for k, v in mg._native.state_dict().items()} == {k: v.shape for k, v in zoo_sd.items()}
    # PyTorch's outputs in eval and train mode, from numpy and from torch inputs.
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(2))
    module.eval()
    mg.model.eval()
    with torch.no_grad():
        want = module(x)
    got = mg(x)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got_np = mg.model(x.numpy())
    assert isinstance(got_np, np.ndarray)
    np.testing.assert_allclose(got_np, want.numpy(), rtol=1e-5, atol=1e-5)
    # The zoo's own graph with the module's weights computes the same.
    zoo.load_state_dict(mg._native.state_dict())
    zoo.model.eval()
    np.testing.assert_allclose(zoo(x.numpy()), want.numpy(), rtol=1e-5, atol=1e-5)
    if name != "vgg7":
        module.train()
        mg.model.train()
        with torch.no_grad():
            want = module(x)
        torch.testing.assert_close(mg(x), want, rtol=1e-5, atol=1e-5)
        # Batch norm's running statistics moved as PyTorch's did.
        for k, v in mg.state_dict().items():
            torch.testing.assert_close(v, module.state_dict()[k], rtol=1e-5, atol=1e-6)


class MixedOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.pool = nn.AvgPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 4).view(1, 4, 1, 1))
        self.fc = nn.Linear(8, 3)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x):
        h = self.act(self.conv(x))
        a = self.gap(h * self.scale)
        b = F.adaptive_avg_pool2d(torch.sigmoid(self.pool(h)), 1)
        h = torch.cat([a, b], 1).flatten(1)
        return F.log_softmax(torch.tanh(self.fc(h)) - F.gelu(self.fc(h)), dim=-1)


class Matmuls(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Parameter(torch.randn(6, 3))
        self.fc = nn.Linear(12, 4)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        h = x.view(x.size(0), 4, 6)
        h = torch.matmul(h, self.proj).permute(0, 2, 1)
        h = torch.clamp(h.transpose(1, 2), -1.0, 1.0).reshape(x.size(0), -1)
        return F.softmax(self.drop(self.fc(F.pad(h, (0, 0)))), dim=1)


class Signal1d(nn.Module):
    """1-d layers; `skip` (nn.Identity) and `contiguous()` compute nothing and are passed over."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding="same")
        self.bn = nn.BatchNorm1d(4)
        self.skip = nn.Identity()
        self.pool = nn.AvgPool1d(2)
        self.gap = nn.AdaptiveAvgPool1d(2)
        self.act = nn.SELU()

    def forward(self, x):
        h = F.relu6(self.bn(self.conv(x)))
        h = torch.cat([h, self.skip(x) + x], dim=1).contiguous()
        h = F.max_pool1d(h, 2) / torch.sqrt(torch.sigmoid(self.pool(h)))
        h = self.gap(self.act(h).sigmoid() ** h.tanh())
        return F.pad(h, (1, 0)).flatten(1)


class Scalars(nn.Module):
    """Number operands: each is a `<reader>_const` get_attr node before its reader."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = (x * 2.0 + 1) / 4
        h = 0.5**h - h**2
        return self.fc(h) - 1


# (module, sample shape, expected (name, fx op, mase op) of the traced nodes)
FUNCTIONAL = [
    (
        MixedOps,
        (3, 8, 8),
        [
            ("x", "placeholder", "placeholder"),
            ("conv", "call_module", "conv2d"),
            ("act", "call_module", "leaky_relu"),
            ("scale", "get_attr", "constant"),
            ("mul", "call_function", "mul"),
            ("gap", "call_module", "adaptive_avg_pool2d"),
            ("pool", "call_module", "avg_pool2d"),
            ("sigmoid", "call_function", "sigmoid"),
            ("adaptive_avg_pool2d", "call_function", "adaptive_avg_pool2d"),
            ("cat", "call_function", "cat"),
            ("flatten", "call_method", "flatten"),
            ("fc", "call_module", "linear"),
            ("tanh", "call_function", "tanh"),
            ("fc_1", "call_module", "linear"),
            ("gelu", "call_function", "gelu"),
            ("sub", "call_function", "sub"),
            ("log_softmax", "call_function", "log_softmax"),
            ("output", "output", "output"),
        ],
    ),
    (
        Matmuls,
        (24,),
        [
            ("x", "placeholder", "placeholder"),
            ("size", "call_method", "size"),
            ("view", "call_method", "view"),
            ("proj", "get_attr", "constant"),
            ("matmul", "call_function", "matmul"),
            ("permute", "call_method", "permute"),
            ("transpose", "call_method", "transpose"),
            ("clamp", "call_function", "clamp"),
            ("size_1", "call_method", "size"),
            ("reshape", "call_method", "reshape"),
            ("pad", "call_function", "pad"),
            ("fc", "call_module", "linear"),
            ("drop", "call_module", "dropout"),
            ("softmax", "call_function", "softmax"),
            ("output", "output", "output"),
        ],
    ),
    (
        Signal1d,
        (2, 8),
        [
            ("x", "placeholder", "placeholder"),
            ("conv", "call_module", "conv1d"),
            ("bn", "call_module", "batch_norm1d"),
            ("relu6", "call_function", "relu6"),
            ("add", "call_function", "add"),
            ("cat", "call_function", "cat"),
            ("max_pool1d", "call_function", "max_pool1d"),
            ("pool", "call_module", "avg_pool1d"),
            ("sigmoid", "call_function", "sigmoid"),
            ("sqrt", "call_function", "sqrt"),
            ("truediv", "call_function", "div"),
            ("act", "call_module", "selu"),
            ("sigmoid_1", "call_method", "sigmoid"),
            ("tanh", "call_method", "tanh"),
            ("pow_1", "call_function", "pow"),
            ("gap", "call_module", "adaptive_avg_pool1d"),
            ("pad", "call_function", "pad"),
            ("flatten", "call_method", "flatten"),
            ("output", "output", "output"),
        ],
    ),
    (
        Scalars,
        (4,),
        [
            ("x", "placeholder", "placeholder"),
            ("mul_const", "get_attr", "constant"),
            ("mul", "call_function", "mul"),
            ("add_const", "get_attr", "constant"),
            ("add", "call_function", "add"),
            ("truediv_const", "get_attr", "constant"),
            ("truediv", "call_function", "div"),
            ("pow_1_const", "get_attr", "constant"),
            ("pow_1", "call_function", "pow"),
            ("pow_2_const", "get_attr", "constant"),
            ("pow_2", "call_function", "pow"),
            ("sub", "call_function", "sub"),
            ("fc", "call_module", "linear"),
            ("sub_1_const", "get_attr", "constant"),
            ("sub_1", "call_function", "sub"),
            ("output", "output", "output"),
        ],
    ),
]


@pytest.mark.parametrize("cls,shape,nodes", FUNCTIONAL, ids=[f[0].__name__ for f in FUNCTIONAL])
def test_functions_methods_and_attributes_map_onto_mase_ops(cls, shape, nodes):
    torch.manual_seed(0)
    module = cls().eval()
    mg = MaseGraph(model=module, dataset_info=info(shape, 3))
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(
        mg, {"dummy_in": {"x": np.zeros((2, *shape), np.float32)}, "add_value": False}
    )
    assert [(n.name, n.op, get_mase_op(n)) for n in mg.nodes] == nodes
    mg.model.eval()
    x = torch.randn(5, *shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = module(x)
    torch.testing.assert_close(mg(x), want, rtol=1e-5, atol=1e-5)


def test_unmappable_nodes_are_listed_in_one_value_error():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.rnn = nn.GRU(4, 4)

        def forward(self, x):
            h = self.fc(x) * 2.0
            return torch.round(h) + torch.abs(h) + h.std(1, keepdim=True) + x @ "w"

    with pytest.raises(ValueError) as e:
        MaseGraph(model=Bad())
    text = e.value.args[0]
    assert "\n" not in text
    assert text.startswith("MaseGraph: 4 torch.fx node(s) have no mase-rs op: round_1 (torch.round: no mase-rs op); ")
    assert "std (std: no mase-rs op)" in text
    assert "matmul (operator.matmul: operand 'w' is neither a tensor nor a number; mase-rs mat_mul takes tensors)" in text
    assert "round_1 (torch.round: no mase-rs op)" in text
    assert "abs_1 (torch.abs: no mase-rs op)" in text


BAD = [
    # (what, module factory, sample shape, words of the one-line message)
    (
        "data-dependent control flow",
        lambda: type("Branch", (nn.Module,), {"forward": lambda self, x: x if x.sum() > 0 else -x})(),
        None,
        "torch.fx cannot trace Branch",
    ),
    ("dict output", lambda: type("Named", (nn.Module,), {"forward": lambda self, x: {"y": x}})(), None, "returns dict"),
    ("tuple with a number", lambda: type("Pair", (nn.Module,), {"forward": lambda self, x: (x, 2)})(), None, "a tuple holding int"),
    ("shape mismatch", lambda: nn.Sequential(nn.Linear(16, 8), nn.Linear(16, 5)), (16,), "node `_1` (linear)"),
]

# torch.nn modules with settings mase-rs has no op for: each stays one PyTorch module.
KEPT_WHOLE = [
    # (what, module factory, sample shape, its class)
    ("momentum None", lambda: nn.Sequential(nn.BatchNorm1d(4, momentum=None)), (4,), "BatchNorm1d"),
    ("dilated pool", lambda: nn.Sequential(nn.MaxPool2d(2, dilation=2)), (1, 5, 5), "MaxPool2d"),
]


@pytest.mark.parametrize("what,make,shape,cls", KEPT_WHOLE, ids=[k[0] for k in KEPT_WHOLE])
def test_modules_with_settings_mase_rs_lacks_stay_whole(what, make, shape, cls):
    module = make().eval()
    mg = MaseGraph(model=module, dataset_info=info(shape, 5))
    mg.model.eval()
    assert [n.module["class"] for n in mg.nodes if n.module and n.module["op"] == "opaque"] == [cls]
    x = torch.randn(3, *shape)
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x))
    # The executor cannot run it and says which node and why, in one line.
    with pytest.raises(ValueError) as e:
        mg.fit((x.numpy(), np.zeros(3, np.int64)), epochs=1)
    assert "\n" not in e.value.args[0] and "`_0`" in e.value.args[0] and cls in e.value.args[0]


@pytest.mark.parametrize("what,make,shape,words", BAD, ids=[b[0] for b in BAD])
def test_bad_modules_raise_one_line_value_errors(what, make, shape, words):
    with pytest.raises(ValueError) as e:
        MaseGraph(model=make(), dataset_info=None if shape is None else info(shape, 5))
    assert "\n" not in e.value.args[0]
    assert words in e.value.args[0]


def test_round_trip_trace_fine_tune_here_load_back_into_torch(data_dir):
    torch.manual_seed(0)
    module = zoo_module("jsc-toy", (16,), 5)
    before = copy.deepcopy(module.state_dict())
    dm = mase_rs.MaseDataModule(name="jsc", batch_size=32, model_name="jsc-toy", num_workers=0)
    dm.prepare_data()
    dm.setup()
    mg = MaseGraph(model=module, dataset_info=dm.dataset_info)
    hist = mg.fit(dm, epochs=3, lr=1e-2)
    assert [h["epoch"] for h in hist] == [0, 1, 2] and hist[-1]["loss"] < hist[0]["loss"]
    sd = mg.state_dict()
    assert list(sd) == list(before) and all(isinstance(v, torch.Tensor) for v in sd.values())
    n_train = len(dm._splits["train"][1])
    assert int(sd["seq_blocks.0.num_batches_tracked"]) == 3 * -(-n_train // 32)
    assert not torch.equal(sd["seq_blocks.2.weight"], before["seq_blocks.2.weight"])
    module.load_state_dict(sd)  # strict: every key of the module
    module.eval()
    mg.model.eval()
    xs, _ys = next(iter(dm.test_dataloader()))
    with torch.no_grad():
        want = module(xs)
    torch.testing.assert_close(mg(xs), want, rtol=1e-5, atol=1e-5)


def test_fit_matches_a_pytorch_training_loop():
    # The same batches in order, Adam(lr=1e-2), train mode: PyTorch's weights after two epochs
    # of four steps. (jsc-three-linear: a bias right before a batch norm has a gradient of zero
    # up to rounding, which Adam scales up to steps of lr either way; it has none.)
    torch.manual_seed(0)
    module = zoo_module("jsc-three-linear", (16,), 5)
    mg = MaseGraph(model=module)
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(64, 16, generator=g), torch.randint(0, 5, (64,), generator=g)
    hist = mg.fit((x, y), epochs=2, batch_size=16, lr=1e-2, shuffle=False)
    opt = torch.optim.Adam(module.parameters(), lr=1e-2)
    module.train()
    losses = []
    for epoch in range(2):
        for i in range(0, 64, 16):
            opt.zero_grad()
            loss = F.cross_entropy(module(x[i : i + 16]), y[i : i + 16])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert [h["loss"] for h in hist] == pytest.approx([np.mean(losses[:4]), np.mean(losses[4:])], rel=1e-5)
    assert int(mg.state_dict()["seq_blocks.0.num_batches_tracked"]) == 8
    for k, v in mg.state_dict().items():
        torch.testing.assert_close(v, module.state_dict()[k], rtol=1e-4, atol=1e-5, msg=k)


def test_fit_bad_input_raises_one_line():
    mg = MaseGraph(model=zoo_module("jsc-tiny", (16,), 5))
    x = np.zeros((8, 16), np.float32)
    cases = [
        (lambda: mg.fit((x, np.full(8, 7))), "label 7"),
        (lambda: mg.fit((x, np.full(8, -1))), "label -1 is not a class index"),
        (lambda: mg.fit((x, np.zeros(3, np.int64))), "8 samples and 3 labels"),
        (lambda: mg.fit((x, np.zeros(8, np.int64)), optimizer="lbfgs"), "unknown optimizer `lbfgs`"),
        (lambda: mg.fit("data"), "data must be a MaseDataModule"),
        (lambda: mg.fit((x, np.zeros(8, np.float32))), "expected integer class indices, got an array of float32"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert "\n" not in e.value.args[0] and words in e.value.args[0], e.value.args[0]


def test_data_module_yields_torch_tensors_for_cross_entropy(data_dir):
    dm = mase_rs.MaseDataModule(name="jsc", batch_size=16, model_name="jsc-tiny", num_workers=0)
    xs, ys = next(iter(dm.val_dataloader()))
    assert isinstance(xs, torch.Tensor) and xs.dtype == torch.float32 and ys.dtype == torch.int64
    model = mase_rs.get_model("jsc-tiny", "cls", dm.dataset_info)
    mg = MaseGraph(model=model)
    mg.model.eval()
    logits = mg.model(xs)
    assert isinstance(logits, torch.Tensor)
    loss = F.cross_entropy(logits, ys)
    out = logits.detach().numpy()
    ref = -np.mean(np.log(np.exp(out)[np.arange(16), ys.numpy()] / np.exp(out).sum(1)))
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    # get_model's model takes `model(**dummy_in)` and torch tensors as well.
    torch.testing.assert_close(model(**{"x": xs}), logits)


def test_get_node_actual_target_is_the_users_submodule_with_the_graphs_weights():
    module = zoo_module("jsc-tiny", (16,), 5)
    mg = MaseGraph(model=module)
    sd = mg.state_dict()
    sd["seq_blocks.2.weight"] = torch.full((5, 16), 0.25)
    mg.load_state_dict(sd)
    fc = [n for n in mg.nodes if n.name == "seq_blocks_2"][0]
    target = get_node_actual_target(fc)
    assert target is module.seq_blocks[2]
    assert torch.equal(target.weight, torch.full((5, 16), 0.25))
    assert get_node_actual_target(mg.nodes[0]) == "x"


def test_deepcopy_of_a_traced_graph_keeps_the_torch_state():
    module = zoo_module("jsc-tiny", (16,), 5)
    mg = MaseGraph(model=module)
    other = copy.deepcopy(mg)
    other(torch.randn(4, 16))  # train mode: one batch for batch norm
    assert int(other.state_dict()["seq_blocks.0.num_batches_tracked"]) == 1
    assert int(mg.state_dict()["seq_blocks.0.num_batches_tracked"]) == 0


# (benchmark model, zoo model, sample shape, classes)
BENCH = [
    ("jsc-tiny", "jsc-tiny", (16,), 5),
    ("jsc-toy", "jsc-toy", (16,), 5),
    ("jsc-three-layer", "jsc-three-layer", (16,), 5),
    ("tfc", "tfc", (1, 28, 28), 10),
    ("vgg7", "vgg7", (3, 32, 32), 10),
]


@pytest.mark.parametrize("bench,zoo_name,shape,classes", BENCH, ids=[b[0] for b in BENCH])
def test_the_benchmarks_pytorch_models_trace_to_the_zoo_graphs(bench, zoo_name, shape, classes):
    module = pytorch_ref.build(bench)
    mg = MaseGraph(model=module, dataset_info=info(shape, classes))
    zoo = MaseGraph(model=mase_rs.get_model(zoo_name, "cls", info(shape, classes)))
    assert [(n.name, n.op, n.target) for n in mg.nodes] == [(n.name, n.op, n.target) for n in zoo.nodes]
    assert trainable_count(mg) == trainable_count(zoo) == sum(p.numel() for p in module.parameters())


def test_the_benchmarks_fake_quantized_linear_stays_a_pytorch_module():
    # jsc-toy-q's QLinear is not a torch.nn leaf and its forward rounds, which has no op: each
    # stays one PyTorch module in the graph, which PyTorch runs.
    module = pytorch_ref.build("jsc-toy-q")
    mg = MaseGraph(model=module)
    kept = [n.module for n in mg.nodes if n.module and n.module["op"] == "opaque"]
    assert [k["class"] for k in kept] == ["QLinear"] * 3
    x = torch.randn(8, 16)
    module.eval()
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x))


def test_dummy_in_gives_a_traced_module_its_input_shape():
    # Without dataset_info, add_common_metadata takes the sample shape from MASE's dummy_in.
    module = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    mg = MaseGraph(model=module)
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.zeros(2, 1, 8, 8)}, "add_value": False})
    shapes = [n.meta["mase"].parameters["common"]["results"]["data_out_0"]["shape"] for n in mg.nodes[:-1]]
    assert shapes == [[2, 1, 8, 8], [2, 4, 6, 6], [2, 4, 6, 6], [2, 144], [2, 3]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU tensor test is skipped")
def test_a_module_and_tensors_on_a_gpu():
    # The weights are copied to the CPU for mase-rs; outputs go back to the input's device.
    torch.manual_seed(0)
    module = zoo_module("jsc-toy", (16,), 5).cuda()
    randomize_buffers(module, 4)
    mg = MaseGraph(model=module)
    module.eval()
    mg.model.eval()
    x = torch.randn(8, 16, device="cuda")
    out = mg(x)
    assert out.device == x.device
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-5, atol=1e-5)
    hist = mg.fit((x, torch.arange(8, device="cuda") % 5), epochs=2, batch_size=4, lr=1e-2)
    assert len(hist) == 2
    module.load_state_dict(mg.state_dict())
    assert module.seq_blocks[2].weight.device == x.device
    mg.model.eval()
    module.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg(x), module(x), rtol=1e-5, atol=1e-5)


def test_a_module_called_output_keeps_fx_names():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.input = nn.Linear(4, 4)
            self.output = nn.Linear(4, 2)

        def forward(self, x):
            return self.output(self.input(x))

    mg = MaseGraph(model=Head())
    assert [(n.name, n.op, n.target) for n in mg.nodes] == [
        ("x", "placeholder", "x"),
        ("input_1", "call_module", "input"),
        ("output", "call_module", "output"),
        ("output_1", "output", "output"),
    ]


def test_number_operands_are_constants_outside_the_modules_state_dict():
    module = Scalars()
    mg = MaseGraph(model=module)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(6))
    mg.fit((x, torch.arange(6) % 3), epochs=2, batch_size=3, lr=1e-2)
    consts = {k: float(v) for k, v in mg._native.state_dict().items() if k.endswith("_const")}
    # Not trained: the numbers of the forward.
    assert consts == {
        "mul_const": 2.0,
        "add_const": 1.0,
        "truediv_const": 4.0,
        "pow_1_const": 0.5,
        "pow_2_const": 2.0,
        "sub_1_const": 1.0,
    }
    assert list(mg.state_dict()) == ["fc.weight", "fc.bias"]
    module.load_state_dict(mg.state_dict())
    mg.load_state_dict(module.state_dict())
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg(x), module(x), rtol=1e-5, atol=1e-5)


def test_a_graph_module_is_taken_as_traced():
    module = zoo_module("toy_tiny", (1, 2, 2), 2)
    gm = torch.fx.symbolic_trace(module)
    mg = MaseGraph(model=gm)
    assert [n.name for n in mg.nodes] == [n.name for n in gm.graph.nodes] == ["x", "size", "view", "l1", "relu_1", "output"]
    x = torch.randn(3, 1, 2, 2)
    with torch.no_grad():
        torch.testing.assert_close(mg(x), gm(x), rtol=1e-5, atol=1e-5)
