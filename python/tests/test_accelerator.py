"""`ch train|test|search --accelerator`: PyTorch runs the model on a device while `ch`'s trainer
drives it, with the checkpoints, metrics and `--resume` of a CPU run. CI runs the PyTorch path
on the CPU (`--accelerator torch-cpu`); `MASE_TEST_DEVICE=cuda` runs it on a GPU
(`--accelerator gpu`, `scripts/gpu-checks.sh`), where float sums differ from the executor's in
their order and the comparisons are looser."""

import json
import os

import numpy as np
import pytest

from mase_rs import _native

DEVICE = os.environ.get("MASE_TEST_DEVICE", "cpu")
ACCELERATOR = "torch-cpu" if DEVICE == "cpu" else "gpu"
# Same formulas in the same float32: the executor and PyTorch's CPU kernels agree to rounding.
RTOL = 1e-5 if DEVICE == "cpu" else 2e-3

try:
    import torch
except ImportError:  # the no-torch test run checks the refusal
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="SKIP: torch is not installed")


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """`ch --threads 1` sets PyTorch's thread count in this process; later tests get theirs back."""
    before = torch.get_num_threads() if torch is not None else None
    yield
    if before is not None:
        torch.set_num_threads(before)


def ch(capfd, *args):
    """Runs `ch ... --json` in this process; returns (exit status, the JSON result, stderr)."""
    capfd.readouterr()
    status = _native.ch_main(["ch", *args, "--json"])
    out, err = capfd.readouterr()
    return status, (json.loads(out) if status == 0 else None), err


def history(result):
    return np.array([[h["train_loss"], h["train_acc"], h["val_loss"], h["val_acc"]] for h in result["history"]])


def train(capfd, tmp_path, project, accelerator, *extra, model=("mlp", "digits"), epochs=2):
    args = [*model, "--max-epochs", str(epochs), "--batch-size", "32", "--learning-rate", "3e-3", "--threads", "1"]
    status, result, err = ch(
        capfd, "train", *args, "--project-dir", str(tmp_path), "--project", project, "--accelerator", accelerator, *extra
    )
    assert status == 0, err
    return result


@needs_torch
@pytest.mark.parametrize("model", [("mlp", "digits"), ("jsc-tiny", "jsc")], ids=["mlp", "jsc-tiny-batch-norm"])
def test_train_on_pytorch_equals_the_executor(capfd, tmp_path, model):
    cpu = train(capfd, tmp_path, "cpu", "cpu", model=model)
    dev = train(capfd, tmp_path, "dev", ACCELERATOR, model=model)
    np.testing.assert_allclose(history(dev), history(cpu), rtol=RTOL, atol=RTOL)
    # The checkpoint holds the device's weights (batch norm's running statistics included: the
    # validation loss reads them), and `ch test` reads it on either engine.
    ckpt = dev["best_checkpoint"]
    on_cpu = ch(capfd, "test", *model, "--load", ckpt, "--project-dir", str(tmp_path))[1]
    on_dev = ch(capfd, "test", *model, "--load", ckpt, "--project-dir", str(tmp_path), "--accelerator", ACCELERATOR)[1]
    assert on_dev["test_acc"] == pytest.approx(on_cpu["test_acc"], abs=1 / on_cpu["samples"] if DEVICE != "cpu" else 0)
    assert on_dev["test_loss"] == pytest.approx(on_cpu["test_loss"], rel=RTOL)


@needs_torch
def test_resume_on_pytorch_continues_as_the_executor_does(capfd, tmp_path):
    # Two epochs, then `--resume` to three: the optimizer state crosses the checkpoint both ways.
    runs = {}
    for engine in ("cpu", ACCELERATOR):
        train(capfd, tmp_path, engine, engine)
        runs[engine] = train(capfd, tmp_path, engine, engine, "--resume", epochs=3)
    assert len(runs["cpu"]["history"]) == 3
    np.testing.assert_allclose(history(runs[ACCELERATOR]), history(runs["cpu"]), rtol=RTOL, atol=RTOL)
    # A run resumed on the other engine continues the same way.
    mixed = train(capfd, tmp_path, "cpu", ACCELERATOR, "--resume", epochs=4)
    plain = train(capfd, tmp_path, ACCELERATOR, "cpu", "--resume", epochs=4)
    np.testing.assert_allclose(history(mixed), history(plain), rtol=RTOL, atol=RTOL)


SEARCH = """
model = "mlp"
dataset = "digits"
batch_size = 32
learning_rate = 3e-3

[search.search_space]
name = "graph/quantize/mixed_precision_ptq"
[search.search_space.setup]
by = "type"
[search.search_space.seed.default.config]
name = ["NA"]
[search.search_space.seed.linear.config]
name = ["integer"]
data_in_width = [8]
data_in_frac_width = ["NA"]
weight_width = [4, 8]
weight_frac_width = ["NA"]
bias_width = [8]
bias_frac_width = ["NA"]

[search.strategy]
name = "optuna"
[search.strategy.sw_runner.basic_train]
max_epochs = 2
[search.strategy.sw_runner.basic_evaluation]
data_loader = "val_dataloader"
num_samples = 512
[search.strategy.setup]
n_jobs = 1
n_trials = 2
sampler = "brute"
sum_scaled_metrics = false
[search.strategy.metrics]
accuracy.scale = 1.0
accuracy.direction = "maximize"
loss.scale = 1.0
loss.direction = "minimize"
"""


@needs_torch
def test_search_trains_and_evaluates_candidates_on_pytorch(capfd, tmp_path):
    config = tmp_path / "search.toml"
    config.write_text(SEARCH)
    metrics = {}
    for engine in ("cpu", ACCELERATOR):
        status, result, err = ch(
            capfd, "search", "--config", str(config), "--project-dir", str(tmp_path), "--project", engine, "--accelerator", engine
        )
        assert status == 0, err
        best = result["studies"][0]["best"]["0"]
        metrics[engine] = [best["software_metrics"][k] for k in ("train_loss", "train_accuracy", "loss", "accuracy")]
    # Quantization-aware training through the fake quantizers and their straight-through
    # estimators, in PyTorch, gives the executor's numbers.
    np.testing.assert_allclose(metrics[ACCELERATOR], metrics["cpu"], rtol=RTOL)


def test_accelerator_refusals_are_one_line(capfd, tmp_path):
    cases = [("tpu", "--accelerator: `tpu` is not an accelerator: expected one of auto, cpu, gpu, cuda, mps, torch-cpu")]
    if torch is None:
        cases.append(("torch-cpu", "accelerator `torch-cpu`: needs PyTorch, which is not installed here: `pip install torch`"))
    elif not torch.cuda.is_available():
        cases.append(("gpu", f"accelerator `cuda`: PyTorch {torch.__version__} sees no CUDA device"))
    for accelerator, expected in cases:
        status, _, err = ch(capfd, "train", "mlp", "digits", "--max-epochs", "1", "--project-dir", str(tmp_path), "--accelerator", accelerator)
        assert status != 0
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and expected in lines[0], err


@needs_torch
def test_a_pytorch_train_forward_reaches_the_graph_s_running_statistics():
    # PyTorch's batch norm updates its running statistics in place without bumping their
    # version: the graph must still see them after a train-mode forward in PyTorch.
    import mase_rs
    from mase_rs import MaseGraph, get_dataset_info, get_model

    mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc"), seed=0))
    model = mg.model
    model.train()
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(0)) * 3 + 1
    with mase_rs.nn.backend.using("torch"):
        model(x)
    torch_state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    graph_state = mg._native.state_dict()
    mean = next(k for k in graph_state if k.endswith("running_mean"))
    assert not np.allclose(torch_state[mean], 0.0)
    np.testing.assert_array_equal(np.asarray(graph_state[mean]), torch_state[mean])
