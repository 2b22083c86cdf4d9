#!/usr/bin/env bash
# Builds the Python package (mase_rs) into a fresh virtual environment and runs its pytest suite.
# The extension is built with the `py-test` profile (optimised, no LTO) to keep the build short;
# `pip install .` builds the release profile for users.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${MASE_PY_VENV:-$root/target/py-venv}"
rm -rf "$venv" "$root/target/py-wheels"
# torch (for the tracing and tensor tests): the system Python's when it has one (the venv sees
# its site-packages; mase_rs is still installed fresh into the venv), otherwise from PyPI.
# MASE_PY_TORCH=none builds a venv without torch, to run the suite as a user without it would.
torch_mode="${MASE_PY_TORCH:-auto}"
if [ "$torch_mode" = auto ] && python3 -c "import torch" 2>/dev/null; then
    python3 -m venv --system-site-packages "$venv"
else
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check maturin pytest numpy
# With --system-site-packages, pip counts a system maturin as installed and puts no `maturin`
# binary into the venv, which `python -m maturin` looks for; install the venv its own.
if [ ! -x "$venv/bin/maturin" ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --ignore-installed --no-deps maturin
fi
if [ "$torch_mode" != none ] && ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check torch
fi
# Lightning, for the test that trains `mg.model` with `Trainer.fit` (pure Python; it takes the
# venv's torch).
if [ "$torch_mode" != none ] && ! "$venv/bin/python" -c "import lightning" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check lightning
fi
# torchvision, for the test that puts its classification zoo through MaseGraph. Its models are
# pure Python; `--no-deps` keeps the venv's torch (torchvision pins the torch release it was built
# with, and its compiled detection ops are not used), and Pillow is what `import torchvision` needs.
if [ "$torch_mode" != none ] && ! "$venv/bin/python" -c "import torchvision" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps torchvision
    "$venv/bin/pip" install --quiet --disable-pip-version-check pillow
fi
# onnx and onnxruntime, for the tests that export `mg.model` to ONNX and run the file: without
# them those tests skip, and under CI=true such a skip fails the run (conftest.py).
if [ "$torch_mode" != none ] && ! "$venv/bin/python" -c "import onnx, onnxruntime" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check onnx onnxruntime
fi
"$venv/bin/maturin" build --quiet --profile py-test --locked --interpreter "$venv/bin/python" --out "$root/target/py-wheels"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$root"/target/py-wheels/mase_rs-*.whl
# Run from the tests folder so that `import mase_rs` finds the installed wheel, not python/.
cd "$root/python/tests"
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q "$@"
