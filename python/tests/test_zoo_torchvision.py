"""The zoo's torchvision models (`resnet18` with the CIFAR stem, `mobilenet_v2`, `vit-tiny`) against
torchvision itself: the zoo model's state dict loads into torchvision's model (same names and
shapes) and torchvision's back into the zoo model; both give the same outputs in eval and the same
gradients for a training step, on a CIFAR-shaped batch.

Skipped with a SKIP line where torchvision is missing; under CI=true it must run (the test
command installs torchvision)."""

import copy
import os

import pytest

torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
if os.environ.get("CI") == "true":
    import torchvision  # noqa: F401  (CI installs it: a missing torchvision fails here)
tv_models = pytest.importorskip("torchvision.models", reason="SKIP: torchvision is not installed")

import torch.nn as nn  # noqa: E402

from mase_rs import DatasetInfo, MaseGraph, get_model  # noqa: E402

CIFAR = (3, 32, 32)


def cifar_resnet18(classes):
    """torchvision's resnet18 with the CIFAR stem the zoo's has."""
    m = tv_models.resnet18(num_classes=classes)
    m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    m.maxpool = nn.Identity()
    return m


def cifar_mobilenet_v2(classes):
    """torchvision's mobilenet_v2 with the stride-1 stem the zoo uses on 32x32 images."""
    m = tv_models.mobilenet_v2(num_classes=classes)
    m.features[0][0] = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
    return m


def vit_tiny(classes):
    """torchvision's `VisionTransformer` at the zoo's vit-tiny size on 32x32 images."""
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(32, 4, 6, 3, 192, 768, num_classes=classes)


# (zoo model, torchvision reference, sample shape, classes)
MODELS = [
    ("resnet18", cifar_resnet18, CIFAR, 10),
    ("vit-tiny", vit_tiny, CIFAR, 10),
    ("mobilenet_v2", cifar_mobilenet_v2, CIFAR, 10),
    ("mobilenet_v2", lambda c: tv_models.mobilenet_v2(num_classes=c), (3, 64, 64), 7),
]


def relative(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def randomize_buffers(module, seed):
    """Non-trivial batch-norm statistics, so that eval outputs depend on them."""
    g = torch.Generator().manual_seed(seed)
    for name, buf in module.named_buffers():
        if name.endswith("running_mean"):
            buf.copy_(torch.randn(buf.shape, generator=g) * 0.3)
        elif name.endswith("running_var"):
            buf.copy_(torch.rand(buf.shape, generator=g) + 0.5)


def without_dropout(module):
    """Dropout masks are random on both sides: gradients can only be compared without them."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return module


@pytest.mark.parametrize("name,reference,shape,classes", MODELS, ids=[f"{m[0]}-{m[2][1]}" for m in MODELS])
def test_zoo_model_and_torchvision_share_checkpoints_outputs_and_gradients(name, reference, shape, classes):
    torch.manual_seed(0)
    info = DatasetInfo(name="images", num_classes=classes, sample_shape=shape)
    zoo = MaseGraph(model=get_model(name, "cls", info))
    ref = reference(classes)
    # The zoo's checkpoint loads into torchvision's model: the same names and shapes, less
    # batch norm's `num_batches_tracked` counters, which mase-rs does not hold (they only matter
    # for `momentum=None`).
    zoo_sd = {k: torch.as_tensor(v) for k, v in zoo.state_dict().items()}
    ref_sd = {k: v for k, v in ref.state_dict().items() if not k.endswith("num_batches_tracked")}
    assert {k: tuple(v.shape) for k, v in zoo_sd.items()} == {k: tuple(v.shape) for k, v in ref_sd.items()}
    missing, unexpected = ref.load_state_dict(zoo_sd, strict=False)
    assert unexpected == [] and all(k.endswith("num_batches_tracked") for k in missing)
    # And torchvision's back into the zoo's, with batch-norm statistics that matter in eval.
    randomize_buffers(ref, 1)
    zoo.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items() if not k.endswith("num_batches_tracked")})
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(2))
    ref.eval()
    zoo.model.eval()
    with torch.no_grad():
        want = ref(x)
        got = zoo.model(x)
    assert got.shape == want.shape == (4, classes)
    assert relative(got, want) <= 1e-4, f"{name}: eval output differs from torchvision's"
    # One training step (train-mode batch norm, cross-entropy): the same gradients. Deep
    # networks with batch norm over a few samples amplify float32 rounding in backward, so both
    # engines are measured against torchvision in float64 (as test_torchvision.py does): the
    # zoo's worst parameter gradient must be within 1e-4 of it, or within 10 times torchvision
    # float32's worst.
    without_dropout(ref)
    without_dropout(zoo.model)
    exact = copy.deepcopy(ref).double()
    labels = torch.arange(4) % classes
    grads = {}
    for key, m, inp in (("torchvision", ref, x), ("exact", exact, x.double()), ("zoo", zoo.model, x)):
        m.train()
        m.zero_grad()
        torch.nn.functional.cross_entropy(m(inp), labels).backward()
        grads[key] = {n: p.grad for n, p in m.named_parameters()}
    assert grads["zoo"].keys() == grads["exact"].keys()

    def worst(key):
        errors = {n: relative(g.double(), grads["exact"][n]) for n, g in grads[key].items()}
        return max(errors.values()), max(errors, key=errors.get)

    (ours, where), (theirs, _) = worst("zoo"), worst("torchvision")
    assert ours <= max(1e-4, 10 * theirs), f"{name}: gradient of {where} is {ours:.1e} from float64, torchvision's worst {theirs:.1e}"
