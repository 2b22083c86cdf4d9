"""`nn.MultiheadAttention`, `nn.TransformerEncoderLayer` and `nn.TransformerEncoder` load as the
ops they are made of: they equal PyTorch, train with PyTorch's gradients, keep the state-dict
names, and quantize reaches their projections."""

import copy
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


def assert_gradients_equal_pytorch(module, x, shape, classes):
    """A training step on the graph of `module` (labels 0, 1, 2) gives PyTorch's gradients, and
    gradients to the same parameters."""
    twin = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=classes, sample_shape=shape))
    y = torch.tensor([0, 1, 2])
    for m in (twin.model, module):
        m.train()
        m.zero_grad()
        F.cross_entropy(m(x), y).backward()
    ours = {name: p.grad for name, p in twin.model.named_parameters()}
    for name, p in module.named_parameters():
        # A module the forward does not call has no parameters in the graph.
        assert (ours.get(name) is None) == (p.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(ours[name], p.grad, rtol=1e-4, atol=1e-5, msg=name)


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
    assert_gradients_equal_pytorch(module, x, shape, 5)


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


class MaskedAttention(nn.Module):
    """Attention with masks: `kind` picks which (see `MASKED`). A token is padding where its first
    feature is 1; every sequence keeps some tokens."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.embed = nn.Linear(8, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(copy.deepcopy(self.layer), 2, enable_nested_tensor=kind == "nested")
        self.register_buffer("causal", torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))
        self.register_buffer("bias", nn.Transformer.generate_square_subsequent_mask(5) + torch.linspace(-0.5, 0.5, 25).view(5, 5))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        pad = x[:, :, 0] == 1.0
        h = self.embed(x)
        if self.kind == "bool attn_mask":
            h = self.attn(h, h, h, attn_mask=self.causal, need_weights=False)[0]
        elif self.kind == "float attn_mask and key padding":
            h, _ = self.attn(h, h, h, key_padding_mask=pad, attn_mask=self.bias)
        elif self.kind == "layer, key padding":
            h = self.layer(h, src_key_padding_mask=pad)
        elif self.kind == "encoder, both masks":
            h = self.encoder(h, mask=self.bias, src_key_padding_mask=pad)
        elif self.kind == "nested":
            h = self.encoder(h, src_key_padding_mask=pad)
        return self.head(h.mean(1))


MASKED = ["bool attn_mask", "float attn_mask and key padding", "layer, key padding", "encoder, both masks"]


def masked_batch():
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(4))
    x[0, 1, 0] = 1.0
    x[1, 3:, 0] = 1.0
    return x


@pytest.mark.parametrize("kind", MASKED)
def test_attention_masks_load_as_ops_with_pytorchs_values_and_gradients(kind):
    torch.manual_seed(0)
    module = MaskedAttention(kind).eval()
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=3, sample_shape=(5, 8)))
    counts = ops(mg)
    assert "opaque" not in counts, counts
    assert counts.get("where", 0) >= 1, counts
    x = masked_batch()
    mg.model.eval()
    # PyTorch's reference with gradients on: without them its encoder layers take their fused
    # "fast path", which gives NaN everywhere for a float mask other than the causal one beside a
    # key-padding mask, as this encoder's (PyTorch 2.15).
    want = module(x).detach()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), want, rtol=1e-5, atol=1e-5)
    assert_gradients_equal_pytorch(module, x, (5, 8), 3)


def test_an_encoder_on_nested_tensors_with_a_padding_mask_stays_pytorch_code():
    # PyTorch's encoder returns zeros at padded positions there, which its layers' ops do not.
    torch.manual_seed(0)
    module = MaskedAttention("nested").eval()
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=3, sample_shape=(5, 8)))
    assert "opaque" in ops(mg)
    x = masked_batch()
    mg.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(mg.model(x), module(x), rtol=0, atol=0)


class ArgumentMasks(nn.Module):
    """Attention whose masks are the forward's own arguments: `pad` (bool, True = padding) and
    `mask` (see `ARGUMENT_MASKS` for each kind's dtype)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.embed = nn.Linear(8, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 3)

    def forward(self, x, pad, mask):
        h = self.embed(x)
        if self.kind == "attention, float mask and padding":
            h = self.attn(h, h, h, key_padding_mask=pad, attn_mask=mask, need_weights=False)[0]
        elif self.kind == "encoder layer, padding":
            h = self.encoder.layers[0](h, src_key_padding_mask=pad)
        elif self.kind == "encoder, bool mask and inverted keep":
            h = self.encoder(h, mask=mask, src_key_padding_mask=~pad)
        return self.head(h.mean(1))


# kind -> (input_dtypes, the `pad` and `mask` arguments for the batch of `masked_batch()`)
def argument_masks(kind):
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[0, 1] = pad[1, 3:] = True
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    if kind == "attention, float mask and padding":
        return {"pad": torch.bool, "mask": torch.float32}, (pad, torch.linspace(-1.0, 1.0, 25).view(5, 5))
    if kind == "encoder layer, padding":
        return {"pad": torch.bool}, (pad, causal)
    # `~pad` of the argument `keep`: True = kept.
    return {"pad": torch.bool, "mask": torch.bool}, (~pad, causal)


ARGUMENT_MASKS = ["attention, float mask and padding", "encoder layer, padding", "encoder, bool mask and inverted keep"]


@pytest.mark.parametrize("backend", ["rust", "torch"])
@pytest.mark.parametrize("kind", ARGUMENT_MASKS)
def test_masks_passed_to_the_forward_load_as_ops_given_their_dtypes(kind, backend):
    import mase_rs

    torch.manual_seed(0)
    module = ArgumentMasks(kind).eval()
    dtypes, (pad, mask) = argument_masks(kind)
    mg = MaseGraph(model=copy.deepcopy(module), dataset_info=DatasetInfo(name="t", num_classes=3, sample_shape=(5, 8)), input_dtypes=dtypes)
    counts = ops(mg)
    assert "opaque" not in counts, counts
    assert counts.get("input") == 3 and counts.get("where", 0) >= 1, counts
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(4))
    y = torch.tensor([0, 1, 2])
    mase_rs.set_backend(backend)
    try:
        mg.model.eval()
        with torch.no_grad():
            torch.testing.assert_close(mg.model(x, pad, mask), module(x, pad, mask), rtol=1e-5, atol=1e-5)
        # A training step gives PyTorch's loss and gradients.
        grads = []
        for m in (mg.model, module):
            m.train()
            m.zero_grad()
            F.cross_entropy(m(x, pad, mask), y).backward()
            grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
        assert grads[0].keys() == grads[1].keys()
        for name, g in grads[1].items():
            torch.testing.assert_close(grads[0][name], g, rtol=1e-4, atol=1e-5, msg=name)
    finally:
        mase_rs.set_backend("rust")


def test_the_rust_executor_takes_a_bool_mask_argument_as_numpy():
    torch.manual_seed(0)
    module = ArgumentMasks("encoder layer, padding").eval()
    dtypes, (pad, mask) = argument_masks("encoder layer, padding")
    mg = MaseGraph(model=module, dataset_info=DatasetInfo(name="t", num_classes=3, sample_shape=(5, 8)), input_dtypes=dtypes)
    mg.model.eval()
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = module(x, pad, mask).numpy()
    got = mg(x.numpy(), pad.numpy(), mask.numpy())
    assert abs(got - want).max() <= 1e-5


@pytest.mark.parametrize(
    "model, dtypes, message",
    [
        ("module", {"padding": torch.bool}, "input_dtypes names `padding`, which is not an argument of the traced forward (its arguments: x, pad, mask)"),
        ("module", {"pad": torch.int64}, "input_dtypes['pad'] must be torch.bool or a float dtype, not torch.int64"),
        ("module", {"pad": "bool"}, "input_dtypes['pad'] must be torch.bool or a float dtype, not 'bool'"),
        ("module", [("pad", torch.bool)], "input_dtypes must be a dict of argument name to dtype, not list"),
        ("zoo", {"pad": torch.bool}, "input_dtypes applies to a torch.nn.Module, not ZooModel"),
    ],
)
def test_bad_input_dtypes_are_refused_in_one_line(model, dtypes, message):
    from mase_rs import get_dataset_info, get_model

    target = ArgumentMasks("encoder layer, padding") if model == "module" else get_model("jsc-tiny", "cls", get_dataset_info("jsc"))
    with pytest.raises((ValueError, TypeError)) as e:
        MaseGraph(model=target, input_dtypes=dtypes)
    assert str(e.value) == "MaseGraph: " + message


def test_a_mask_argument_without_its_dtype_is_refused_with_the_way_out():
    with pytest.raises(ValueError) as e:
        MaseGraph(model=ArgumentMasks("encoder layer, padding"), dataset_info=DatasetInfo(name="t", num_classes=3, sample_shape=(5, 8)))
    assert str(e.value).endswith(
        "; the forward takes several tensors (x, pad, mask): an attention mask among them loads as ops given its dtype, "
        "MaseGraph(input_dtypes={name: torch.bool})"
    ), str(e.value)
