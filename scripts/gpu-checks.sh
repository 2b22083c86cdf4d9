#!/usr/bin/env bash
# The device checks of issue "MaseGraph as a real PyTorch module" on a machine with a CUDA GPU, in
# one command. That machine may have torch but no network, so the wheels come from here:
#
#   scripts/gpu-checks.sh --prepare     # here: builds the mase_rs wheel and downloads pytest's
#                                       # wheels into target/gpu-wheels (carry that folder over)
#   scripts/gpu-checks.sh               # there: installs them into a venv that sees the system's
#                                       # torch, runs the torch tests on CUDA, then
#                                       # bench/gpu_checks.py (figures in gpu_checks.json)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
wheels="$root/target/gpu-wheels"
if [ "${1:-}" = --prepare ]; then
    rm -rf "$wheels" && mkdir -p "$wheels"
    python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: --dest "$wheels" pytest
    maturin build --release --locked --out "$wheels"
    ls "$wheels"
    exit 0
fi
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-checks: torch sees no CUDA device')"
venv="$root/target/gpu-venv"
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$wheels" --force-reinstall --no-deps "$wheels"/mase_rs-*.whl
"$venv/bin/python" -c "import pytest" 2>/dev/null || "$venv/bin/pip" install --quiet --no-index --find-links "$wheels" pytest
start=$(date +%s)
(cd "$root/python/tests" && MASE_TEST_DEVICE=cuda "$venv/bin/python" -m pytest -q test_torch_backend.py test_torch_module.py test_torch_formats.py test_accelerator.py)
"$venv/bin/python" bench/gpu_checks.py --device cuda --out "$root/gpu_checks.json"
echo "gpu-checks: done in $(( $(date +%s) - start )) s; figures in gpu_checks.json"
