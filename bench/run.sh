#!/usr/bin/env bash
# Runs mase-bench (release build) and bench/pytorch_ref.py on the same models and protocol and
# prints the comparison as markdown; also writes it to bench/results.md and the raw JSON lines to
# bench/results.jsonl.
#
# usage: bench/run.sh [--threads N] [--models a,b] [--steps N] [--vgg-steps N]
#   --threads N   one thread count (default: both 1 and 2)
#   --models a,b  subset of jsc-tiny,jsc-toy,jsc-three-layer,tfc,vgg7 (default: all)
#   --steps N     timed steps of the small models (default 500); --vgg-steps N for vgg7 (default 3)
# PYTHON overrides the interpreter (default /work/pyenv/bin/python, else python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
threads="1 2"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --models|--steps|--vgg-steps|--rows) extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "${PYTHON:-}" ]; then
  if [ -x /work/pyenv/bin/python ]; then PYTHON=/work/pyenv/bin/python; else PYTHON=python3; fi
fi

cd "$root"
cargo build --release -p mase-bench >&2
bin="$root/target/release/mase-bench"

raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
for t in $threads; do
  echo "threads=$t: mase-rs" >&2
  "$bin" --json --threads "$t" ${extra[@]+"${extra[@]}"} | tee -a "$raw" >&2
  echo "threads=$t: PyTorch" >&2
  "$PYTHON" "$here/pytorch_ref.py" --threads "$t" ${extra[@]+"${extra[@]}"} | tee -a "$raw" >&2
done
cp "$raw" "$here/results.jsonl"
"$PYTHON" "$here/table.py" "$raw" | tee "$here/results.md"
