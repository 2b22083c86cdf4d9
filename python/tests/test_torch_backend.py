"""The PyTorch implementation of every graph equals mase-rs's executor: the zoo's models and every
shipped ONNX file, forward in eval mode, and forward and backward in train mode, with
`mase_rs.set_backend("torch")` against the default `"rust"` on CPU tensors.

`MASE_TEST_DEVICE=cuda` runs the PyTorch side on that device instead (`scripts/gpu-checks.sh`)."""

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
F = torch.nn.functional

import mase_rs  # noqa: E402
from mase_rs import DatasetInfo, MaseGraph, get_dataset_info, get_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEVICE = os.environ.get("MASE_TEST_DEVICE", "cpu")
ZOO = [
    ("jsc-tiny", "jsc"),
    ("jsc-toy", "jsc"),
    ("jsc-s", "jsc"),
    ("jsc-three-linear", "jsc"),
    ("jsc-three-layer", "jsc"),
    ("toy", "toy_tiny"),
    ("toy_tiny", "toy_tiny"),
    ("mlp", "digits"),
    ("tfc", "mnist"),
    ("mnist-cnn", "mnist"),
    ("vgg7", DatasetInfo(name="cifar10", num_classes=10, sample_shape=(3, 32, 32))),
]
ONNX = sorted(
    str(p.relative_to(REPO))
    for folder in ("models", "ops", "trained", "pytorch")
    for p in (REPO / "crates/interop/tests/fixtures" / folder).glob("*.onnx")
)


@pytest.fixture(autouse=True)
def rust_backend():
    mase_rs.set_backend("rust")
    yield
    mase_rs.set_backend("rust")


def both(mg, run):
    """`run(mg, device)` on the executor, then on PyTorch (on `DEVICE`); outputs on the CPU."""
    rust = run(mg, "cpu")
    mase_rs.set_backend("torch")
    try:
        mg.model.to(DEVICE)
        return rust, to_cpu(run(mg, DEVICE))
    finally:
        mg.model.to("cpu")
        mase_rs.set_backend("rust")


def to_cpu(v):
    if isinstance(v, tuple):
        return tuple(to_cpu(t) for t in v)
    if isinstance(v, dict):
        return {k: to_cpu(t) for k, t in v.items()}
    return v.cpu()


def close(a, b, what):
    # float32 sums in another order: relative to the largest value of the tensor.
    scale = max(1.0, float(b.abs().max()))
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * scale, msg=what)


def batch(shape, n=4, seed=0):
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("model,dataset", ZOO, ids=[m for m, _ in ZOO])
def test_zoo_model_on_both_engines(model, dataset):
    info = dataset if isinstance(dataset, DatasetInfo) else get_dataset_info(dataset)
    mg = MaseGraph(model=get_model(model, "cls", info))
    x = batch(info.sample_shape)
    y = torch.arange(len(x)) % info.num_classes
    mg.model.eval()
    with torch.no_grad():
        rust, pt = both(mg, lambda g, d: g.model(x.to(d)))
    close(rust, pt, f"{model} eval")

    state = {k: v.clone() for k, v in mg.model.state_dict().items()}

    def train_step(g, d):
        # Both engines from the same weights and running statistics.
        g.model.load_state_dict(state)
        g.model.train()
        g.model.zero_grad()
        out = g.model(x.to(d))
        F.cross_entropy(out, y.to(d)).backward()
        return out.detach(), {n: p.grad.clone() for n, p in g.model.named_parameters()}

    (out_r, grads_r), (out_t, grads_t) = both(mg, train_step)
    close(out_r, out_t, f"{model} train forward")
    assert grads_r.keys() == grads_t.keys()
    for name in grads_r:
        close(grads_r[name], grads_t[name], f"{model} gradient of {name}")


@pytest.mark.parametrize("path", ONNX)
def test_onnx_file_on_both_engines(path):
    mg = MaseGraph(model=str(REPO / path))
    shape = mg._raw.sample_shape
    assert shape is not None, path
    x = batch(shape, n=2)
    mg.model.eval()
    with torch.no_grad():
        rust, pt = both(mg, lambda g, d: g.model(x.to(d)))
    close(rust, pt, path)
    np.testing.assert_allclose(mg(x.numpy()), rust.numpy(), rtol=0, atol=0)
