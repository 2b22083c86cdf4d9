"""Attention and embeddings traced from PyTorch: `nn.Embedding` (with a padding row),
`torch.einsum`, `torch.bmm` and `F.scaled_dot_product_attention` (bool and float masks held as
attributes or passed to the forward, `is_causal`, `scale`). The traced graph equals PyTorch forward on the executor, its ONNX export runs in onnxruntime with PyTorch's outputs,
and what mase-rs refuses is refused in one line."""

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
nn, F = torch.nn, torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, _native  # noqa: E402
from mase_rs.passes.graph import add_common_metadata_analysis_pass, init_metadata_analysis_pass  # noqa: E402

SEQ, VOCAB = 5, 10


class Encoder(nn.Module):
    """Separate query, key and value projections as HF BERT names them, then attention in each
    form mase-rs reads."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 8, padding_idx=0)
        self.query, self.key, self.value = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.register_buffer("keep", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))
        self.bias = nn.Parameter(0.1 * torch.randn(SEQ, SEQ))
        self.fc = nn.Linear(8, 3)

    def forward(self, ids):
        h = self.tok(ids)
        q, k, v = self.query(h), self.key(h), self.value(h)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=self.keep)
        s = torch.einsum("bqd,bkd->bqk", q, k) * 0.3 + self.bias
        b = torch.bmm(torch.softmax(s, -1), v)
        c = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
        d = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        return self.fc((a + b + c + d).mean(1))


def batch(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n, SEQ), generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def test_the_encoder_traces_to_the_mase_ops():
    nodes = json.loads(MaseGraph(model=Encoder())._native.graph_json())["nodes"]
    ops = [n["op"] for n in nodes]
    kinds = {o["op"] for o in ops}
    for want in ("embedding", "einsum", "mat_mul", "scaled_dot_product_attention", "linear"):
        assert want in kinds, (want, sorted(kinds))
    masks = sorted(str(o.get("mask")) for o in ops if o["op"] == "scaled_dot_product_attention")
    assert masks == ["None", "additive", "bool"]


def test_forward_equals_pytorch_on_the_executor():
    # Gradients are checked against PyTorch in crates/runtime/tests/attention.rs; here the traced
    # graph runs on the executor (numpy in, numpy out), whose values are floats: whole-number ids.
    torch.manual_seed(0)
    user = Encoder().eval()
    ids, _ = batch()
    mg = MaseGraph(model=copy.deepcopy(user))
    mg.model.eval()
    np.testing.assert_allclose(mg(ids.float().numpy()), user(ids).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_mg_model_takes_float_ids_on_both_engines_and_trains():
    torch.manual_seed(0)
    user = Encoder().eval()
    ids, labels = batch()
    want = user(ids).detach()
    mg = MaseGraph(model=copy.deepcopy(user))
    mg.model.eval()
    for engine in ("rust", "torch"):
        mase_rs.set_backend(engine)
        with torch.no_grad():
            torch.testing.assert_close(mg.model(ids.float()), want, rtol=1e-5, atol=1e-5, msg=engine)
    # Integer ids (PyTorch's own) run in PyTorch, with the same result.
    with torch.no_grad():
        torch.testing.assert_close(mg.model(ids), want, rtol=1e-5, atol=1e-5)
    mase_rs.set_backend("rust")
    mg.model.train()
    opt = torch.optim.Adam(mg.model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(mg.model(ids.float()), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_ids_that_are_not_rows_are_refused():
    mg = MaseGraph(model=Encoder())
    ids = batch()[0].float()
    ids[1, 2] = 2.5
    with pytest.raises(ValueError, match=r"embedding.*id 2\.5 at index 7 .*not a whole number in 0\.\.10"):
        mg(ids.numpy())


def test_onnx_export_runs_in_onnxruntime_with_pytorchs_outputs(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="SKIP: onnxruntime is not installed")
    torch.manual_seed(1)
    user = Encoder().eval()
    mg = MaseGraph(model=user)
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": batch(2)[0].float()}, "add_value": False})
    ckpt, path = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    mg.save(ckpt)
    assert _native.ch_main(["ch", "export", "--load", str(ckpt), "-o", str(path)]) == 0
    ids, _ = batch(7, seed=3)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: ids.float().numpy()})[0]
    np.testing.assert_allclose(got, user(ids).detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1), "dropout_p = 0.1: only 0 is supported"),
        (lambda x: torch.einsum("bij,bjk,bkl->bil", x, x, x), 'einsum "bij,bjk,bkl->bil" of 3 operands'),
        (lambda x: torch.einsum("bii->bi", x), 'einsum "bii->bi" of 1 operands'),
    ],
)
def test_what_mase_rs_lacks_is_listed(call, words):
    class M(nn.Module):
        def forward(self, x):
            return call(x)

    with pytest.raises(ValueError, match=words):
        MaseGraph(model=M())


def test_an_einsum_that_is_no_matrix_product_is_refused_naming_the_equation():
    class M(nn.Module):
        def forward(self, x):
            return torch.einsum("bij,bjk->bi", x, x)

    with pytest.raises(ValueError, match=r"einsum equation \"bij,bjk->bi\": letter 'k' is summed within one operand"):
        MaseGraph(model=M(), dataset_info=None)


class ArgumentMaskAttention(nn.Module):
    """`F.scaled_dot_product_attention` with the forward's own bool and float masks."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, keep, bias):
        h = self.proj(x)
        return F.scaled_dot_product_attention(h, h, h, attn_mask=keep) + F.scaled_dot_product_attention(h, h, h, attn_mask=bias)


@pytest.mark.parametrize("backend", ["rust", "torch"])
def test_sdpa_takes_mask_arguments_given_their_dtypes(backend):
    torch.manual_seed(0)
    user = ArgumentMaskAttention()
    mg = MaseGraph(model=copy.deepcopy(user), input_dtypes={"keep": torch.bool, "bias": torch.float32})
    ops = [n["op"] for n in json.loads(mg._native.graph_json())["nodes"]]
    assert sorted(str(o.get("mask")) for o in ops if o["op"] == "scaled_dot_product_attention") == ["additive", "bool"]
    x = torch.randn(2, SEQ, 8, generator=torch.Generator().manual_seed(1))
    keep = torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool))
    bias = torch.linspace(-1.0, 1.0, SEQ * SEQ).view(SEQ, SEQ)
    mase_rs.set_backend(backend)
    torch.testing.assert_close(mg.model(x, keep, bias), user(x, keep, bias), rtol=1e-5, atol=1e-5)
