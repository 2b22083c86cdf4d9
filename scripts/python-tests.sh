#!/usr/bin/env bash
# Builds the Python package (mase_rs) into a fresh virtual environment and runs its pytest suite.
# The extension is built with the `py-test` profile (optimised, no LTO) to keep the build short;
# `pip install .` builds the release profile for users.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${MASE_PY_VENV:-$root/target/py-venv}"
rm -rf "$venv" "$root/target/py-wheels"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check maturin pytest numpy
"$venv/bin/maturin" build --quiet --profile py-test --locked --interpreter "$venv/bin/python" --out "$root/target/py-wheels"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$root"/target/py-wheels/mase_rs-*.whl
# Run from the tests folder so that `import mase_rs` finds the installed wheel, not python/.
cd "$root/python/tests"
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q "$@"
