"""torchvision's classification zoo through `MaseGraph(model=m)`: the smallest model of every
family that `torchvision.models.list_models` gives, on 3x64x64 inputs.

Each model either loads (natively, or with the modules and code mase-rs has no op for kept as
opaque nodes that PyTorch runs) and then equals PyTorch in eval, or is refused with one
`ValueError` line; never a wrong answer. A model that loads also quantizes (integer 8/4 and
MXINT8 on every linear and conv) and, below 30M parameters, gives PyTorch's gradients for a
training step. The status of every model is the README's table (`MASE_UPDATE_DOCS=1` rewrites it).

Skipped with a SKIP line where torchvision is missing; under CI=true it must run (the test
command installs torchvision)."""

import copy
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
if os.environ.get("CI") == "true":
    import torchvision  # noqa: F401  (CI installs it: a missing torchvision fails here)
tv_models = pytest.importorskip("torchvision.models", reason="SKIP: torchvision is not installed")

from mase_rs import DatasetInfo, MaseGraph  # noqa: E402
from mase_rs.passes.graph import quantize_transform_pass  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- torchvision-status: begin -->", "<!-- torchvision-status: end -->"
GRADIENT_LIMIT = 30_000_000

INTEGER = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}
MXINT8 = {"name": "mxint", "data_in_width": 8, "weight_width": 8, "weight_block_size": 32, "bias_width": 8}


def family(name):
    """`resnet18` -> `resnet`, `regnet_x_400mf` -> `regnet`, `vit_b_16` -> `vit`."""
    return re.match(r"[a-z]+", name).group(0)


def smallest_per_family():
    """The model of each family with the fewest parameters, by torchvision's own weight tables
    (no model is built to count them)."""
    best = {}
    for name in tv_models.list_models(module=tv_models):
        params = tv_models.get_model_weights(name).DEFAULT.meta["num_params"]
        f = family(name)
        if f not in best or params < best[f][1]:
            best[f] = (name, params)
    return sorted(best.values())


MODELS = smallest_per_family()


def build(name):
    torch.manual_seed(0)
    kwargs = {"image_size": 64} if name.startswith("vit") else {}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=False)
    # Inception needs 75 pixels or more; MaxViT's windows of 7 need sides of 7 * 32.
    side = {"inception_v3": 80, "maxvit_t": 224}.get(name, 64)
    model = tv_models.get_model(name, **kwargs).eval()
    # The training step compares gradients, which random dropout masks and dropped residual
    # branches would not allow.
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
            m.p = 0.0
    return model, torch.randn(2, 3, side, side, generator=torch.Generator().manual_seed(1))


def opaque_classes(mg):
    records = json.loads(mg._native.view_records())
    return sorted({r["op"]["class"] for r in records if r["op"]["op"] == "opaque"})


def relative(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def status_of(name):
    """(status line for the README, the loaded graph or None)."""
    model, x = build(name)
    info = DatasetInfo(name="images", num_classes=1000, sample_shape=tuple(x.shape[1:]))
    try:
        # A traced module keeps the user's submodules: trace a copy, so that the two models'
        # gradients and running statistics stay apart.
        mg = MaseGraph(model=copy.deepcopy(model), dataset_info=info)
    except ValueError as e:
        message = str(e)
        assert "\n" not in message, f"{name}: the refusal is one line: {message}"
        return f"refused: {message[:160]}{'...' if len(message) > 160 else ''}", None, model, x
    opaque = opaque_classes(mg)
    shown = ", ".join(f"`{c}`" for c in opaque[:3]) + (f" and {len(opaque) - 3} more" if len(opaque) > 3 else "")
    status = "native" if not opaque else "loads; PyTorch runs " + shown
    return status, mg, model, x


@pytest.mark.parametrize("name,params", MODELS, ids=[m for m, _ in MODELS])
def test_torchvision_model(name, params, record_status):
    status, mg, model, x = status_of(name)
    record_status[name] = (params, status)
    if mg is None:
        return
    with torch.no_grad():
        ref = model(x)
        out = mg.model(x)
    assert relative(out, ref) <= 1e-4, f"{name}: eval output differs from PyTorch"
    for fmt in (INTEGER, MXINT8):
        q = MaseGraph(model=mg)
        config = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": fmt}, "conv2d": {"config": fmt}}
        q, _ = quantize_transform_pass(q, config)
        with torch.no_grad():
            y = q.model(x)
        assert torch.isfinite(y).all() and y.shape == ref.shape, f"{name} quantized with {fmt['name']}"
    if params < GRADIENT_LIMIT:
        # Deep networks with batch norm over two samples amplify float32 rounding in backward:
        # both engines are measured against PyTorch in float64, and mase-rs's worst parameter
        # gradient must be within 1e-4 of it, or within 10 times PyTorch float32's worst.
        exact = copy.deepcopy(model).double()
        labels = torch.tensor([3, 7])
        grads = {}
        for key, m, inp in (("torch", model, x), ("exact", exact, x.double()), ("ours", mg.model, x)):
            m.train()
            torch.nn.functional.cross_entropy(m(inp), labels).backward()
            grads[key] = {n: p.grad for n, p in m.named_parameters() if p.grad is not None}
        def worst(key):
            errors = {n: relative(g.double(), grads["exact"][n]) for n, g in grads[key].items()}
            return max(errors.values()), max(errors, key=errors.get)

        (ours, where), (theirs, _) = worst("ours"), worst("torch")
        assert ours <= max(1e-4, 10 * theirs), f"{name}: gradient of {where} is {ours:.1e} from float64, PyTorch's worst {theirs:.1e}"


@pytest.fixture(scope="module")
def record_status():
    """Collects each model's status and, after the last one, checks the README's table."""
    rows = {}
    yield rows
    if len(rows) != len(MODELS):
        return  # a model failed or was deselected: the table is checked on a full run only
    lines = ["| model | parameters | status |", "|---|---|---|"]
    for name, (params, status) in sorted(rows.items()):
        lines.append(f"| `{name}` | {params / 1e6:.1f}M | {status} |")
    table = "\n".join(lines)
    readme = (REPO / "README.md").read_text()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    if os.environ.get("MASE_UPDATE_DOCS"):
        (REPO / "README.md").write_text(readme[:start] + "\n" + table + "\n" + readme[end:])
        return
    assert readme[start:end].strip() == table, "README's torchvision table is out of date: rerun with MASE_UPDATE_DOCS=1"
