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
# A training step's gradients are a discontinuous function of the forward values wherever a ReLU
# input or a max-pool pair lies within rounding of its kink: a float32 sum in another order (or by
# another algorithm) may send a gradient the other way there, and the whole tensor moves by up to
# several % of its largest value. vgg7 has about 1.8 million ReLU inputs at batch 4, so some sit
# that close on most random batches. Measured on six random vgg7-shaped models and batches against
# float64: PyTorch's own float32 gradients were 1e-2 off on two, the direct path's on two,
# Winograd's on four (each 2e-6 to 2e-5 on the rest). vgg7's gradients are therefore compared on
# a twin with smooth activations (`test_vgg7_shaped_training_step_on_both_engines`).
KINKED = {"vgg7"}
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


def training_step(mg, x, y):
    """A training step for `both`: each engine starts from `mg`'s weights and running statistics
    as they are now, and gives its output and the gradient of every parameter."""
    state = {k: v.clone() for k, v in mg.model.state_dict().items()}

    def step(g, d):
        g.model.load_state_dict(state)
        g.model.train()
        g.model.zero_grad()
        out = g.model(x.to(d))
        F.cross_entropy(out, y.to(d)).backward()
        return out.detach(), {n: p.grad.clone() for n, p in g.model.named_parameters()}

    return step


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

    (out_r, grads_r), (out_t, grads_t) = both(mg, training_step(mg, x, y))
    close(out_r, out_t, f"{model} train forward")
    assert grads_r.keys() == grads_t.keys()
    if model in KINKED:
        return
    for name in grads_r:
        close(grads_r[name], grads_t[name], f"{model} gradient of {name}")


def vgg7_shaped(act):
    """vgg7's layers (three pairs of 3x3 convolutions with batch norm, 128-256-512 channels, two
    1024-wide linears) with smooth activations and average pools, so that its gradients are a
    continuous function of the forward values."""
    nn = torch.nn
    layers, cin = [], 3
    for c in (128, 256, 512):
        for a, b in ((cin, c), (c, c)):
            layers += [nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), act()]
        layers.append(nn.AvgPool2d(2))
        cin = c
    layers += [nn.Flatten(), nn.Linear(512 * 16, 1024), act(), nn.Linear(1024, 1024), act(), nn.Linear(1024, 10)]
    return nn.Sequential(*layers)


@pytest.mark.parametrize("conv_algo", ["fast", "exact", "winograd"])
def test_vgg7_shaped_training_step_on_both_engines(conv_algo):
    torch.manual_seed(0)
    mg = MaseGraph(model=vgg7_shaped(torch.nn.SiLU), conv_algo=conv_algo)
    x = batch((3, 32, 32))
    y = torch.arange(len(x))
    (_, grads_r), (_, grads_t) = both(mg, training_step(mg, x, y))
    assert grads_r.keys() == grads_t.keys()
    for name in grads_r:
        close(grads_r[name], grads_t[name], f"vgg7-shaped ({conv_algo}) gradient of {name}")


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
