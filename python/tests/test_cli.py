"""`ch` on PATH from the wheel runs the Rust CLI."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def ch():
    # The venv's bin folder holds the entry point next to its python.
    path = Path(sys.executable).parent / "ch"
    assert path.exists(), f"no `ch` next to {sys.executable}"
    return str(path)


def test_ch_info_lists_models():
    r = subprocess.run([ch(), "info"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "jsc-tiny" in r.stdout and "toy_tiny" in r.stdout


def test_ch_bad_model_is_one_line_and_nonzero(tmp_path):
    r = subprocess.run([ch(), "train", "jsc-nope", "toy_tiny", "--max-epochs", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "unknown model `jsc-nope`" in r.stderr


def test_ch_is_on_path():
    assert shutil.which("ch") is not None


def test_ch_panic_is_one_line_and_status_70(tmp_path):
    env = dict(os.environ, MASE_FAILPOINT="panic-in-action")
    r = subprocess.run([ch(), "info"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 70
    assert r.stderr.startswith("error: internal error in info: failpoint panic-in-action at crates/cli/src/lib.rs:")
    assert r.stderr.strip().count("\n") == 0


def test_main_returns_the_status_for_help():
    import pytest

    import mase_rs.cli

    with pytest.raises(SystemExit) as e:
        mase_rs.cli.main(["--version"])
    assert e.value.code == 0
