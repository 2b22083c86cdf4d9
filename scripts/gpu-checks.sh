#!/usr/bin/env bash
# The device checks of issue "MaseGraph as a real PyTorch module" on a machine with a CUDA GPU, in
# one command. That machine may have torch but no network, so the wheels come from here:
#
#   scripts/gpu-checks.sh --prepare     # here: builds the mase_rs wheel and downloads pytest's
#                                       # wheels into target/gpu-wheels (carry that folder over)
#   scripts/gpu-checks.sh               # there: installs them into a folder on PYTHONPATH (so the
#                                       # python3 that holds torch, in a venv or not, sees them),
#                                       # runs the torch tests on CUDA, then bench/gpu_checks.py
#                                       # (figures in gpu_checks.json)
#
# GPU_WHEEL_PROFILE=py-test builds the wheel with the quicker test profile instead of release (the
# checks time PyTorch on the GPU; the executor only gives the CPU references).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
wheels="$root/target/gpu-wheels"
if [ "${1:-}" = --prepare ]; then
    rm -rf "$wheels" && mkdir -p "$wheels"
    python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: --dest "$wheels" pytest
    maturin build --profile "${GPU_WHEEL_PROFILE:-release}" --locked --out "$wheels"
    ls "$wheels"
    exit 0
fi
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-checks: torch sees no CUDA device')"
site="$root/target/gpu-site"
rm -rf "$site"
python3 -m pip install --quiet --disable-pip-version-check --no-index --no-deps --target "$site" "$wheels"/mase_rs-*.whl
python3 -c "import pytest" 2>/dev/null || python3 -m pip install --quiet --no-index --find-links "$wheels" --target "$site" pytest
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
(cd "$root/python/tests" && MASE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider test_torch_backend.py test_torch_module.py test_torch_formats.py test_accelerator.py)
python3 bench/gpu_checks.py --device cuda --out "${GPU_CHECKS_OUT:-$root/gpu_checks.json}"
echo "gpu-checks: done in $(( $(date +%s) - start )) s; figures in gpu_checks.json"
