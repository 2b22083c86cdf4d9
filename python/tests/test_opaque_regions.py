"""Code mase-rs has no op for stays PyTorch's: opaque regions (functions mase-rs lacks, indexing by
a tensor, an attention module with `add_zero_attn`, checks) around the layers mase-rs lowers, so that such a
model loads, equals PyTorch, trains in a torch loop and quantizes its layers."""

import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn = torch.nn
F = torch.nn.functional

from mase_rs import DatasetInfo, MaseGraph  # noqa: E402
from mase_rs.passes.graph import (  # noqa: E402
    add_common_metadata_analysis_pass,
    init_metadata_analysis_pass,
    quantize_transform_pass,
)
from conftest import ch_command  # noqa: E402

Q84 = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}


def info(shape, classes=5):
    return DatasetInfo(name="t", num_classes=classes, sample_shape=tuple(shape))


class Tokens(nn.Module):
    """A ViT in miniature with code mase-rs has no op for: a token shift (`torch.roll`, as Swin
    shifts windows), a check, and attention with a zero-attention slot (`add_zero_attn`, which
    mase-rs has no op for) and a mask, called with keyword arguments."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        self.ln = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True, add_zero_attn=True)
        # The patches do not attend to the class token; it attends to them all.
        mask = torch.zeros(5, 5, dtype=torch.bool)
        mask[1:, 0] = True
        self.register_buffer("mask", mask)
        self.fc = nn.Linear(8, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv(x)
        x = x.reshape(n, 8, -1).permute(0, 2, 1)
        x = torch.roll(x, 1, dims=1)
        x = torch.cat([self.cls.expand(n, -1, -1), x], dim=1)
        torch._assert(x.dim() == 3, "tokens are 3-d")
        y = self.ln(x)
        y, _ = self.attn(y, y, y, attn_mask=self.mask, need_weights=False)
        x = x + y
        return self.head(F.relu(self.fc(x[:, 0])))


class Table(nn.Module):
    """A bias computed from a parameter and an integer index table (as Swin and MaxViT do)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.table = nn.Parameter(torch.randn(7))
        self.register_buffer("index", torch.tensor([3, 1, 4, 1]))

    def forward(self, x):
        return self.fc(x) + self.table[self.index]


class Gated(nn.Module):
    """A user's layer with a linear inside and a function mase-rs lacks: the function is a
    region, the linear stays mase-rs's."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return self.fc(x) * torch.erf(x)


# (what, module, sample shape, the opaque nodes' classes, how many nodes mase-rs lowers)
REGIONS = [
    ("vit in miniature", Tokens, (3, 8, 8), ["MultiheadAttention", "roll"], 15),
    ("integer index table", Table, (4,), ["getitem+add"], 4),
    ("a function inside a layer", lambda: nn.Sequential(Gated(), nn.ReLU()), (6,), ["erf"], 5),
]


def opaque_classes(mg):
    return sorted(r["op"]["class"] for r in json.loads(mg._native.view_records()) if r["op"]["op"] == "opaque")


def lowered(mg):
    return sum(r["op"]["op"] != "opaque" for r in json.loads(mg._native.view_records()))


@pytest.mark.parametrize("what,make,shape,classes,native", REGIONS, ids=[r[0] for r in REGIONS])
def test_code_without_ops_becomes_regions_that_equal_pytorch(what, make, shape, classes, native):
    torch.manual_seed(0)
    module = make().eval()
    mg = MaseGraph(model=module, dataset_info=info(shape))
    assert opaque_classes(mg) == classes
    assert lowered(mg) == native
    # The module tree keeps the user's names.
    assert sorted(mg.model.state_dict()) == sorted(module.state_dict())
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(1))
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=0, atol=0)
        np.testing.assert_array_equal(mg(x.numpy()), module(x).numpy())


def test_a_vit_in_miniature_trains_quantizes_and_is_refused_by_export(tmp_path):
    torch.manual_seed(0)
    module = Tokens()
    mg = MaseGraph(model=module, dataset_info=info((3, 8, 8)))
    # Gradients are PyTorch's (the regions are its code; the rest runs in PyTorch with them).
    twin = Tokens()
    twin.load_state_dict(module.state_dict())
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2, 3])
    for m in (mg.model, twin):
        m.train()
        F.cross_entropy(m(x), y).backward()
    ours = {n: p.grad for n, p in mg.model.named_parameters()}
    for name, p in twin.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, rtol=1e-5, atol=1e-6, msg=name)
    # A plain torch loop trains every parameter, those of the regions' modules included.
    opt = torch.optim.Adam(mg.model.parameters(), lr=1e-2)
    before = module.attn.in_proj_weight.detach().clone()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.cross_entropy(mg.model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert not torch.equal(module.attn.in_proj_weight, before)
    # mg.state_dict() has every weight as trained, by the module's names.
    state = mg.state_dict()
    assert list(state) == list(module.state_dict())
    torch.testing.assert_close(state["attn.in_proj_weight"], mg.model.attn.in_proj_weight.detach())
    torch.testing.assert_close(state["cls"], mg.model.cls.detach())
    # Analyses see the regions' shapes.
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": torch.zeros(2, 3, 8, 8)}, "add_value": False})
    shapes = {n.name: n.meta["mase"]["common"]["results"]["data_out_0"]["shape"] for n in mg.nodes if n.module and n.module["op"] == "opaque"}
    assert shapes == {"roll": [2, 4, 8], "getitem_1": [2, 5, 8]}
    # Quantize reaches the layers around the regions and leaves the regions in float.
    config = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": Q84}, "conv2d": {"config": Q84}}
    mg, _ = quantize_transform_pass(mg, config)
    kinds = {name: type(m).__name__ for name, m in mg.model.named_modules()}
    assert (kinds["conv"], kinds["fc"], kinds["head"], kinds["attn"]) == ("Conv2dInteger", "LinearInteger", "LinearInteger", "MultiheadAttention")
    mg.model.eval()
    with torch.no_grad():
        assert torch.isfinite(mg.model(x)).all()
    # Export and emit name an opaque node in one line.
    opaque = [n.name for n in mg.nodes if n.module and n.module["op"] == "opaque"]
    ckpt = tmp_path / "m.ckpt"
    mg.save(ckpt)
    for args in (["export", "--load", str(ckpt), "--format", "qonnx", "-o", str(tmp_path / "m.onnx")], ["emit", "--load", str(ckpt), "-o", str(tmp_path / "rtl")]):
        r = subprocess.run([*ch_command(), *args], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode != 0
        line = r.stderr.strip().splitlines()[-1]
        assert any(f"`{name}`" in line for name in opaque), line


def test_a_module_edit_inside_a_region_is_seen_by_the_next_forward():
    torch.manual_seed(0)
    module = Tokens().eval()
    mg = MaseGraph(model=module, dataset_info=info((3, 8, 8)))
    mg.model.eval()
    x = torch.randn(2, 3, 8, 8)
    replacement = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    mg.model.attn = replacement
    module.attn = replacement
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=0, atol=0)


# (what, module, sample shape, words of the one-line refusal)
REFUSED = [
    (
        "a region's value without the batch goes out",
        lambda: type("Stats", (nn.Module,), {"forward": lambda self, x: torch.erf(x).std(0)})(),
        (4,),
        "returns a tensor without the batch first to the model's output",
    ),
    (
        "the forward fails at the sample shape",
        lambda: type("Fixed", (nn.Module,), {"forward": lambda self, x: torch.erf(x.reshape(2, 7))})(),
        (4,),
        "a forward run on a batch of shape [2, 4] failed: RuntimeError",
    ),
]


@pytest.mark.parametrize("what,make,shape,words", REFUSED, ids=[r[0] for r in REFUSED])
def test_code_that_cannot_be_a_region_is_refused_in_one_line(what, make, shape, words):
    with pytest.raises(ValueError) as e:
        MaseGraph(model=make(), dataset_info=info(shape))
    text = e.value.args[0]
    assert "\n" not in text and words in text, text
    assert text.startswith("MaseGraph: ")


def test_copies_run_their_own_regions():
    import copy

    torch.manual_seed(0)
    module = Tokens().eval()
    mg = MaseGraph(model=module, dataset_info=info((3, 8, 8)))
    mg.model.eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        want = module(x)
    # A graph copy and a deep copy of the module each hold their own attention layer.
    twin = MaseGraph(model=mg)
    twin.model.eval()
    detached = copy.deepcopy(mg.model)
    with torch.no_grad():
        module.attn.out_proj.weight.zero_()
        torch.testing.assert_close(twin.model(x), want, rtol=0, atol=0)
        torch.testing.assert_close(detached(x), want, rtol=0, atol=0)
        assert not torch.equal(mg.model(x), want)
    assert twin.model.attn is not module.attn and detached.attn is not module.attn


def test_load_state_dict_reaches_the_tensors_pytorch_holds():
    torch.manual_seed(0)
    mg = MaseGraph(model=Tokens(), dataset_info=info((3, 8, 8)))
    mg.model.eval()
    other = Tokens().eval()
    mg.load_state_dict(other.state_dict())
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), other(x), rtol=0, atol=0)
    wrong = dict(other.state_dict())
    wrong["attn.in_proj_weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError) as e:
        mg.load_state_dict(wrong)
    assert e.value.args[0] == "load_state_dict: `attn.in_proj_weight` has shape [3, 3]; the module's is [24, 8]"
