"""The GPU check script (`bench/gpu_checks.py`) runs its steps on the CPU with the PyTorch
backend, so that it works when a GPU machine is at hand."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="SKIP: torch is not installed")

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_script_runs_on_the_cpu(tmp_path):
    out = tmp_path / "checks.json"
    args = ["--device", "cpu", "--images", "8", "--batch", "8", "--multipliers", "1,2", "--out", str(out)]
    r = subprocess.run([sys.executable, str(REPO / "bench/gpu_checks.py"), *args], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    # Every graph agrees with the executor; the timings and the search are recorded.
    # The script checks the models with one input and one output (test_multi_io.py the others).
    from mase_rs import MaseGraph

    paths = (REPO / "crates/interop/tests/fixtures").glob("*/*.onnx")
    onnx_files = sum(MaseGraph(model=str(p))._raw.io_counts == (1, 1) for p in paths)
    # Eight small zoo models and four large ones (resnet18, mobilenet_v2, vit-tiny, bert-tiny).
    rows, bounds = report["worst_relative_difference"], report["bound"]
    assert len(rows) == 8 + 4 + onnx_files and rows.keys() == bounds.keys()
    assert all(rows[k] <= bounds[k] for k in rows)
    assert "bert-tiny" in rows and bounds["jsc-toy"] == 1e-4
    assert report["vgg7_epoch"]["images"] == 8 and report["vgg7_epoch"]["ratio"] > 0
    # `ch train --accelerator torch-cpu` read the written CIFAR-10 files and trained an epoch.
    assert report["ch_train_epoch"]["accelerator"] == "torch-cpu" and report["ch_train_epoch"]["files_images"] == 5
    assert report["ch_train_epoch"]["epoch_s"] > 0
    assert report["lab4_vgg7_channel_multiplier"]["2"]["params"] > report["lab4_vgg7_channel_multiplier"]["1"]["params"]
