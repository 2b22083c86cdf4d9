"""`nn.MultiheadAttention`, `nn.TransformerEncoderLayer` and `nn.TransformerEncoder` load as the
ops they are made of: they equal PyTorch, train with PyTorch's gradients, keep the state-dict
names, and quantize reaches their projections."""

import json

import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn = torch.nn
F = torch.nn.functional

from mase_rs import DatasetInfo, MaseGraph  # noqa: E402
from mase_rs.passes.graph import quantize_transform_pass  # noqa: E402

Q84 = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}


class Classifier(nn.Module):
    """A token classifier: embed, encode, pool by the mean, classify."""

    def __init__(self, batch_first=True, norm_first=False, activation="relu", layers=2, final_norm=False, dropout=0.0):
        super().__init__()
        self.batch_first = batch_first
        self.embed = nn.Linear(8, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=dropout, activation=activation, batch_first=batch_first, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(32) if final_norm else None, enable_nested_tensor=False)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        x = self.embed(x)
        if not self.batch_first:
            x = x.transpose(0, 1)
        x = self.encoder(x)
        return self.head(x.mean(1 if self.batch_first else 0))


class OneBlock(nn.Module):
    """A ViT-style block: attention called as torchvision's encoder block calls it."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        y = self.ln(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        return self.head((x + y).amax(1))


# (what, module, the node ops mase-rs lowers that matter here)
MODELS = [
    ("post-norm relu", lambda: Classifier(), {"linear": 8, "mat_mul": 6, "softmax": 2, "layer_norm": 4}),
    ("pre-norm gelu, final norm", lambda: Classifier(norm_first=True, activation="gelu", final_norm=True), {"linear": 8, "mat_mul": 6, "gelu": 2, "layer_norm": 5}),
    ("sequence first", lambda: Classifier(batch_first=False, layers=1), {"linear": 5, "mat_mul": 3, "layer_norm": 2}),
    ("dropout in training", lambda: Classifier(dropout=0.1, layers=1), {"linear": 5, "mat_mul": 3, "dropout": 4}),
    ("multi-head attention alone", OneBlock, {"linear": 2, "mat_mul": 3, "softmax": 1}),
]


def ops(mg):
    records = json.loads(mg._native.view_records())
    counts = {}
    for r in records:
        counts[r["op"]["op"]] = counts.get(r["op"]["op"], 0) + 1
    return counts


@pytest.mark.parametrize("what,make,expected", MODELS, ids=[m[0] for m in MODELS])
def test_attention_modules_load_as_their_ops(what, make, expected):
    torch.manual_seed(0)
    module = make().eval()
    shape = (6, 8) if isinstance(module, Classifier) else (5, 16)
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=5, sample_shape=shape))
    counts = ops(mg)
    assert "opaque" not in counts, counts
    assert {k: counts.get(k, 0) for k in expected} == expected
    assert list(mg.state_dict()) == list(module.state_dict())
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(1))
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=1e-5, atol=1e-5)
    # A training step: PyTorch's gradients (dropout off for the comparison).
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    twin = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=5, sample_shape=shape))
    y = torch.tensor([0, 1, 2])
    for m in (twin.model, module):
        m.train()
        m.zero_grad()
        F.cross_entropy(m(x), y).backward()
    ours = dict(twin.model.named_parameters())
    for name, p in module.named_parameters():
        torch.testing.assert_close(ours[name].grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_quantize_reaches_the_projections():
    torch.manual_seed(0)
    module = Classifier().eval()
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=5, sample_shape=(6, 8)))
    config = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": Q84}, "matmul": {"config": Q84}}
    mg, _ = quantize_transform_pass(mg, config)
    kinds = {name: type(m).__name__ for name, m in mg.model.named_modules()}
    assert kinds["encoder.layers.0.self_attn.out_proj"] == "LinearInteger"
    assert kinds["encoder.layers.1.linear2"] == "LinearInteger"
    products = [r for r in json.loads(mg._native.view_records()) if r["op"]["op"] == "mat_mul"]
    assert len(products) == 6 and all(r.get("quant") for r in products), products
    x = torch.randn(2, 6, 8)
    mg.model.eval()
    with torch.no_grad():
        assert torch.isfinite(mg.model(x)).all()


def test_attention_with_a_mask_stays_pytorch_code():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.register_buffer("mask", torch.triu(torch.ones(4, 4, dtype=torch.bool), 1))

        def forward(self, x):
            return self.attn(x, x, x, attn_mask=self.mask, need_weights=False)[0].mean(1)

    torch.manual_seed(0)
    module = Masked().eval()
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=8, sample_shape=(4, 8)))
    assert "opaque" in ops(mg)
    x = torch.randn(2, 4, 8)
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=0, atol=0)
