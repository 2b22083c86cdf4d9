"""bert-tiny, the zoo's BERT-style encoder classifier, against the same model written in PyTorch
with HuggingFace BERT's module paths (bench/pytorch_ref.py `BertTiny`; transformers is not
needed): state-dict names and shapes, eval outputs, and the gradients of one training step.

Skipped with one line when torch is missing, except under CI=true, where torch is required."""

import os

import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    if os.environ.get("CI") == "true":
        pytest.fail("torch is required under CI=true (scripts/python-tests.sh installs it)", pytrace=False)
    pytest.skip("torch is not installed: the bert-tiny tests are skipped", allow_module_level=True)

import mase_rs
from mase_rs import DatasetInfo, MaseGraph
from pytorch_ref import BertTiny

SEQ, CLASSES, VOCAB = 64, 10, 17


def pair(seed=0):
    """The PyTorch reference with seeded weights and the zoo's graph holding the same weights."""
    torch.manual_seed(seed)
    ref = BertTiny(SEQ, CLASSES)
    info = DatasetInfo(name="digits-seq", num_classes=CLASSES, sample_shape=(SEQ,))
    zoo = MaseGraph(model=mase_rs.get_model("bert-tiny", "cls", info))
    zoo.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    return ref, zoo


def batch(n=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n, SEQ), generator=g), torch.randint(0, CLASSES, (n,), generator=g)


def test_state_dict_names_and_shapes_are_huggingface_berts():
    ref, zoo = pair()
    want = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in zoo.state_dict().items()} == want
    assert "bert.encoder.layer.1.attention.output.LayerNorm.weight" in want
    # The id buffers: positions 0..63, token types all 0.
    sd = zoo.state_dict()
    np.testing.assert_array_equal(np.asarray(sd["bert.embeddings.position_ids"]), np.arange(SEQ, dtype=np.float32)[None])
    np.testing.assert_array_equal(np.asarray(sd["bert.embeddings.token_type_ids"]), np.zeros((1, SEQ), np.float32))
    assert sum(p.numel() for p in ref.parameters()) == 425_226
    assert "425226 params on digits-seq" in mase_rs.get_model_info("bert-tiny")["description"]


def test_eval_outputs_equal_pytorch():
    ref, zoo = pair()
    ids, _ = batch(8)
    ref.eval()
    zoo.model.eval()
    with torch.no_grad():
        want = ref(ids).numpy()
    np.testing.assert_allclose(zoo(ids.float().numpy()), want, rtol=1e-4, atol=1e-5)
    # mg.model on both engines: mase-rs's executor and the graph as PyTorch code.
    try:
        for engine in ("rust", "torch"):
            mase_rs.set_backend(engine)
            with torch.no_grad():
                got = zoo.model(ids.float())
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=engine)
    finally:
        mase_rs.set_backend("rust")
    # Token ids as PyTorch holds them (int64) run on the executor too (float32 holds them
    # exactly); ids beyond 2**24 would not, and take PyTorch.
    link = zoo.model.__dict__["_mase_link"]
    before = link.tape
    with torch.no_grad():
        got = zoo.model(ids)
    assert link.tape == before + 1
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    assert not link.runs_in_rust(ids + 2**24 + 1)


def test_gradients_of_one_training_step_equal_pytorch():
    ref, zoo = pair(seed=2)
    ids, labels = batch(6, seed=3)
    ref.train()
    F.cross_entropy(ref(ids), labels).backward()
    zoo.model.train()
    loss = F.cross_entropy(zoo.model(ids), labels)
    loss.backward()
    got = {k: p.grad for k, p in zoo.model.named_parameters()}
    want = {k: p.grad for k, p in ref.named_parameters()}
    assert sorted(got) == sorted(want)
    # The key projection's bias adds the same q.b to every score of a query, which softmax
    # ignores: its gradient is 0 in exact arithmetic, and both sides give float32 noise (1e-9).
    assert float(want["bert.encoder.layer.0.attention.self.key.bias"].abs().max()) < 1e-6
    for k, g in want.items():
        # Relative to the tensor's largest gradient (at least 1e-8 absolute, for the key biases),
        # so that entries near 0 do not demand more than float32 sums give.
        tol = max(1e-4 * float(g.abs().max()), 1e-8)
        torch.testing.assert_close(got[k], g, rtol=1e-4, atol=tol, msg=k)


def test_digits_seq_is_a_shipped_data_set_of_token_ids():
    info = mase_rs.get_dataset_info("digits-seq")
    assert (info.num_classes, tuple(info.sample_shape)) == (CLASSES, (SEQ,))
