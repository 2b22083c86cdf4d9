import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import mase_rs

REPO = Path(__file__).resolve().parents[2]
# The zoo's models written as PyTorch modules live in the benchmark's bench/pytorch_ref.py; the
# torch tests import them from there.
sys.path.insert(0, str(REPO / "bench"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true the test command installs every optional package the tests use
    (scripts/python-tests.sh), so a test skipped for a missing package fails instead: a check
    that CI never runs would pass unseen."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if "is not installed" in reason:
            report.outcome = "failed"
            report.longrepr = f"{reason} (CI=true: scripts/python-tests.sh installs it)"


@pytest.fixture(scope="session", autouse=True)
def data_dir(tmp_path_factory):
    """The shipped data sets plus the jsc test fixture (the jsc download is not in the repo), as
    `MASE_DATA_DIR` for the Rust side and for `ch`."""
    root = tmp_path_factory.mktemp("data")
    for entry in (REPO / "data").iterdir():
        if entry.is_dir():
            os.symlink(entry, root / entry.name)
    (root / "jsc").mkdir()
    shutil.copy(REPO / "crates/io/tests/fixtures/jsc/jsc_fixture.h5", root / "jsc")
    os.environ["MASE_DATA_DIR"] = str(root)
    return root


@pytest.fixture(scope="session")
def jsc_info(data_dir):
    return mase_rs.get_dataset_info("jsc")


@pytest.fixture
def jsc_tiny(jsc_info):
    """A fresh jsc-tiny graph with metadata, in eval mode."""
    mg = mase_rs.MaseGraph(model=mase_rs.get_model("jsc-tiny", "cls", jsc_info, seed=3))
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": np.zeros((8, 16), np.float32)}, "add_value": False})
    mg.model.eval()
    return mg


@pytest.fixture(scope="session")
def jsc_batch():
    dm = mase_rs.MaseDataModule(name="jsc", batch_size=64, model_name="jsc-tiny", num_workers=0)
    dm.prepare_data()
    dm.setup()
    xs, _ys = next(iter(dm.test_dataloader()))
    return np.asarray(xs, dtype=np.float32)


def ch_command():
    """`ch` as the start of a command line: the script pip installs beside the interpreter, or
    `python -m mase_rs.cli` where the package was installed without it (`pip install --target`,
    as scripts/gpu-checks.sh does on a GPU machine)."""
    script = Path(sys.executable).parent / "ch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mase_rs.cli"]


@pytest.fixture(scope="session", autouse=True)
def full_float32_on_cuda():
    """Tests compare CUDA results with the executor's to float32 rounding: cuDNN's convolutions
    would otherwise use TF32 (10 mantissa bits) on Ampere and later GPUs."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
