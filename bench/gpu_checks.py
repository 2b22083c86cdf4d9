"""The device checks of `mg.model` on a CUDA GPU, in one command (goal: under 8 minutes).

usage: python bench/gpu_checks.py [--device cuda] [--images N] [--batch N] [--multipliers 1,2,4]
                                 [--out FILE]

Run it where torch sees a CUDA device, with mase_rs installed from a wheel built beforehand
(the machine may have no network). It

1. checks every zoo model (mobilenet_v2 in eval only: its dropout) and every shipped ONNX file on the device against mase-rs's executor
   on the CPU: eval outputs, and a train step's outputs and gradients (to 1e-4 relative);
2. times one epoch of VGG7 on CIFAR-10-shaped data (`--images`, default 50,000 random images,
   batch 128) with a plain PyTorch loop (Adam, cross-entropy) over `mg.model.to(device)`, beside
   the same module in plain PyTorch on the same device, and prints the ratio (goal >= 0.9x,
   since the computation is PyTorch's);
3. times `ch train vgg7 cifar10 --accelerator gpu` for one epoch on random CIFAR-10-format files
   of the same number of images (the epoch's seconds include `ch`'s validation pass), beside
   the plain PyTorch epoch of step 2;
4. runs lab 4's VGG7 channel-multiplier brute force (multipliers 1, 2, 4 on every conv, one
   epoch each on the device) and prints each one's parameters and time;
5. writes every figure as one JSON object to `--out` (default `gpu_checks.json`).

`--device cpu` runs the same steps on the CPU with the PyTorch backend (`set_backend("torch")`):
that is how `python/tests/test_gpu_checks.py` keeps this script working without a GPU, with a few
images.
"""

import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import mase_rs
from mase_rs import DatasetInfo, MaseGraph, get_model

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from pytorch_ref import zoo_module  # noqa: E402

# Shapes of the data sets, so that no data files are needed.
CIFAR = DatasetInfo(name="cifar10", num_classes=10, sample_shape=(3, 32, 32))
JSC = DatasetInfo(name="jsc", num_classes=5, sample_shape=(16,))
MNIST = DatasetInfo(name="mnist", num_classes=10, sample_shape=(1, 28, 28))
SMALL = [
    ("jsc-tiny", JSC),
    ("jsc-toy", JSC),
    ("jsc-s", JSC),
    ("jsc-three-layer", JSC),
    ("mlp", MNIST),
    ("tfc", MNIST),
    ("mnist-cnn", MNIST),
    ("vgg7", CIFAR),
]
# The zoo's larger models: (name, data set, input maker, whether a train step is compared).
# mobilenet_v2's classifier has dropout, whose masks differ between the two engines, so only its
# eval output is compared.
DIGITS_SEQ = DatasetInfo(name="digits-seq", num_classes=10, sample_shape=(64,))


def images(n, info, g):
    return torch.randn(n, *info.sample_shape, generator=g)


def token_ids(n, info, g):
    return torch.randint(0, 17, (n, *info.sample_shape), generator=g)


LARGE = [
    ("resnet18", CIFAR, images, True),
    ("mobilenet_v2", CIFAR, images, False),
    ("vit-tiny", CIFAR, images, True),
    ("bert-tiny", DIGITS_SEQ, token_ids, True),
]


def arg(name, default):
    a = sys.argv
    return type(default)(a[a.index(name) + 1]) if name in a else default


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def worst(a, b):
    """Largest difference relative to the largest value of `b`."""
    scale = max(1.0, float(b.abs().max()))
    return float((a - b).abs().max()) / scale


def check_graph(mg, x, y, device):
    """Eval output, train output and gradients of `mg.model` on `device` against the executor on
    the CPU. Returns (worst relative difference, bound): the eval output must be within 1e-4 of
    the executor's. A training step is measured against the same module in float64 on the CPU
    (PyTorch's implementation), since a float32 gradient is sent the other way wherever a ReLU
    input or a max-pool pair lies within rounding of its kink (vgg7 has about 460,000 ReLU
    inputs an image; README, "Convolution algorithms"): the device's worst output or gradient
    difference must be within
    1e-4 of float64, or within 10 times the executor's own worst (as
    python/tests/test_zoo_torchvision.py measures the zoo against torchvision), or within twice
    PyTorch's own float32 CPU kernels' worst (on some CPUs these are further from float64 than
    10 times the executor: vgg7 on an AMD EPYC, 1.9e-3)."""
    backend = mase_rs.get_backend()
    cpu = copy.deepcopy(mg)
    exact = copy.deepcopy(mg).model.double()
    cpu.model.eval()
    mg.model.eval()
    dev = mg.model.to(device)

    def on(engine, f):
        mase_rs.set_backend(engine)
        try:
            return f()
        finally:
            mase_rs.set_backend(backend)

    def floats(t, dtype):
        return t.to(dtype) if t.is_floating_point() else t

    with torch.no_grad():
        err = worst(dev(x.to(device)).cpu(), on("rust", lambda: cpu.model(x)))
    if y is None:
        return err, 1e-4

    def step(model, where, dtype):
        model.train()
        model.zero_grad()
        out = model(floats(x, dtype).to(where))
        F.cross_entropy(out, y.to(where)).backward()
        return [out.detach().cpu().double()] + [p.grad.detach().cpu().double() for _, p in sorted(model.named_parameters()) if p.grad is not None]

    reference = copy.deepcopy(cpu.model)
    want = on("torch", lambda: step(exact, "cpu", torch.float64))
    pytorch = on("torch", lambda: step(reference, "cpu", torch.float32))
    ours = on("rust", lambda: step(cpu.model, "cpu", torch.float32))
    there = step(dev, device, torch.float32)
    assert len(want) == len(ours) == len(there)
    executor = max(worst(a, b) for a, b in zip(ours, want))
    pytorch_cpu = max(worst(a, b) for a, b in zip(pytorch, want))
    on_device = max(worst(a, b) for a, b in zip(there, want))
    return max(err, on_device), max(1e-4, 10 * executor, 2 * pytorch_cpu)


def correctness(device):
    rows = {}
    for name, info in SMALL:
        mg = MaseGraph(model=get_model(name, "cls", info))
        x = torch.randn(8, *info.sample_shape, generator=torch.Generator().manual_seed(0))
        y = torch.arange(8) % info.num_classes
        rows[name] = check_graph(mg, x, y, device)
    for name, info, inputs, train in LARGE:
        mg = MaseGraph(model=get_model(name, "cls", info))
        x = inputs(16, info, torch.Generator().manual_seed(0))
        y = torch.arange(16) % info.num_classes if train else None
        rows[name] = check_graph(mg, x, y, device)
    for path in sorted((REPO / "crates/interop/tests/fixtures").glob("*/*.onnx")):
        mg = MaseGraph(model=str(path))
        if mg._raw.io_counts != (1, 1):
            # Several inputs or outputs: python/tests/test_multi_io.py checks those on the CPU.
            continue
        shape = mg._raw.sample_shape
        x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(0))
        rows[str(path.relative_to(REPO))] = check_graph(mg, x, None, device)
    return rows


def epoch(model, xs, ys, batch, device):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    sync(device)
    t0 = time.perf_counter()
    for i in range(0, len(xs), batch):
        x, y = xs[i : i + batch], ys[i : i + batch]
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    sync(device)
    return time.perf_counter() - t0


def vgg7_epoch(device, images, batch):
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(images, 3, 32, 32, generator=g).to(device)
    ys = torch.randint(0, 10, (images,), generator=g).to(device)
    mg = MaseGraph(model=get_model("vgg7", "cls", CIFAR))
    plain = zoo_module("vgg7", (3, 32, 32), 10)
    plain.load_state_dict({k: torch.as_tensor(v) for k, v in mg.state_dict().items()}, strict=False)
    plain.to(device)
    ours = mg.model.to(device)
    # One warm-up batch each (cuDNN picks its algorithms), then the timed epochs.
    epoch(ours, xs[:batch], ys[:batch], batch, device)
    epoch(plain, xs[:batch], ys[:batch], batch, device)
    t_ours = epoch(ours, xs, ys, batch, device)
    t_plain = epoch(plain, xs, ys, batch, device)
    return {"images": images, "batch": batch, "mg_model_s": t_ours, "plain_pytorch_s": t_plain, "ratio": t_plain / t_ours}


def cifar_files(root, images):
    """Random images and labels in CIFAR-10's binary layout (a label byte, then 3072 pixel
    bytes): five training files and a test file, so `ch` reads them as the real data set."""
    rng = np.random.default_rng(0)
    folder = Path(root) / "cifar10" / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    per = max(images // 5, 1)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        records = rng.integers(0, 256, size=(per, 3073), dtype=np.uint8)
        records[:, 0] %= 10
        (folder / name).write_bytes(records.tobytes())
    return per * 5


def ch_train_epoch(device, images, batch):
    """One epoch of `ch train vgg7 cifar10` on `device` through the pip package's `ch`."""
    accelerator = "torch-cpu" if device == "cpu" else "gpu"
    with tempfile.TemporaryDirectory() as root:
        n = cifar_files(root, images)
        cmd = [sys.executable, "-m", "mase_rs.cli", "train", "vgg7", "cifar10", "--accelerator", accelerator]
        cmd += ["--max-epochs", "1", "--batch-size", str(batch), "--learning-rate", "1e-3", "--data-dir", root]
        cmd += ["--project-dir", str(Path(root) / "out"), "--report-to", "none", "--json"]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            raise SystemExit(f"gpu_checks: `{' '.join(cmd)}` failed: {run.stderr.strip().splitlines()[-1:]}")
        result = json.loads(run.stdout)
    return {"accelerator": accelerator, "files_images": n, "epoch_s": result["history"][0]["seconds"], "wall_s": wall}


def lab4_search(device, images, batch, multipliers):
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(images, 3, 32, 32, generator=g).to(device)
    ys = torch.randint(0, 10, (images,), generator=g).to(device)
    out = {}
    for m in multipliers:
        mg = MaseGraph(model=get_model("vgg7", "cls", CIFAR))
        if m != 1:
            args = {"by": "type", "conv2d": {"config": {"name": "output_only", "channel_multiplier": m}}}
            mg, _ = mase_rs.channel_multiplier_transform_pass(mg, args)
        model = mg.model.to(device)
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        t = epoch(model, xs, ys, batch, device)
        model.eval()
        with torch.no_grad():
            acc = float((model(xs[:batch]).argmax(1) == ys[:batch]).float().mean())
        out[str(m)] = {"params": params, "epoch_s": t, "accuracy_first_batch": acc}
    return out


def main():
    device = arg("--device", "cuda")
    images, batch = arg("--images", 50000), arg("--batch", 128)
    if device == "cpu":
        mase_rs.set_backend("torch")
    elif not torch.cuda.is_available():
        sys.exit(f"gpu_checks: torch {torch.__version__} sees no CUDA device; run with --device cpu to check the script")
    t0 = time.perf_counter()
    report = {"device": device, "torch": torch.__version__}
    if device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name()
    # cuDNN's convolutions use TF32 by default on Ampere and later, which rounds products to 10
    # mantissa bits: the comparison with the executor needs full float32, the timings below keep
    # PyTorch's defaults.
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    checked = correctness(device)
    torch.backends.cudnn.allow_tf32 = tf32
    report["worst_relative_difference"] = rows = {k: v[0] for k, v in checked.items()}
    report["bound"] = {k: v[1] for k, v in checked.items()}
    bad = {k: v for k, (v, bound) in checked.items() if not v <= bound}
    print(f"correctness: {len(rows)} graphs, worst {max(rows.values()):.2e}" + (f", FAILED: {bad}" if bad else ""))
    report["vgg7_epoch"] = e = vgg7_epoch(device, images, batch)
    print(f"vgg7 epoch ({images} images, batch {batch}): mg.model {e['mg_model_s']:.2f} s, plain PyTorch {e['plain_pytorch_s']:.2f} s, ratio {e['ratio']:.2f}x")
    report["ch_train_epoch"] = c = ch_train_epoch(device, images, batch)
    c["ratio_to_plain"] = e["plain_pytorch_s"] * (c["files_images"] / images) / c["epoch_s"]
    print(
        f"ch train vgg7 cifar10 --accelerator {c['accelerator']}: epoch {c['epoch_s']:.2f} s (with validation), "
        f"{c['wall_s']:.2f} s wall; plain PyTorch epoch / ch epoch = {c['ratio_to_plain']:.2f}x"
    )
    multipliers = [int(m) for m in arg("--multipliers", "1,2,4").split(",")]
    report["lab4_vgg7_channel_multiplier"] = s = lab4_search(device, images, batch, multipliers)
    for m, r in s.items():
        print(f"lab 4 multiplier {m}: {r['params']:,} parameters, epoch {r['epoch_s']:.2f} s")
    report["seconds"] = time.perf_counter() - t0
    Path(arg("--out", "gpu_checks.json")).write_text(json.dumps(report, indent=1))
    print(f"done in {report['seconds']:.0f} s")
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
