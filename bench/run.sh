#!/usr/bin/env bash
# Runs mase-bench (release build) and bench/pytorch_ref.py on the same models and protocol and
# prints the comparison as markdown; also writes it to bench/results.md and the raw JSON lines to
# bench/results.jsonl, whose first line (bench/machine.py) records the CPU model, its vector
# extensions (avx2, avx512*, amx), the load average and the PyTorch build.
#
# usage: bench/run.sh [--threads N] [--models a,b] [--repeat R] [--steps N] [--vgg-steps N]
#   --threads N   one thread count (default: both 1 and 2)
#   --models a,b  subset of jsc-tiny,jsc-toy,jsc-toy-q,jsc-three-layer,tfc,vgg7,resnet18,vit-tiny,
#                 bert-tiny-mx (default: the first six and bert-tiny-mx;
#                 jsc-toy-q is jsc-toy with 8/4 fixed-point fake quantization on every Linear,
#                 bert-tiny-mx is bert-tiny with MXINT8 on every Linear, batch 64)
#   --repeat R    run every case R times and keep the best median of each side (default 1);
#                 on a machine shared with other work, 2 or 3 filters out disturbed runs
#   --steps N     timed steps of the small models (default 500); --vgg-steps N for vgg7, resnet18
#                 and vit-tiny (default 3); --bert-steps N for bert-tiny-mx (default 20)
#   --append      add to the lines already in bench/results.jsonl instead of replacing them, so
#                 that a rerun of disturbed cases improves the table (each side keeps its best)
# The two frameworks run back to back for each model, so both see the same machine load.
# PYTHON overrides the interpreter (default /work/pyenv/bin/python, else python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
threads="1 2"
models="jsc-tiny,jsc-toy,jsc-toy-q,jsc-three-layer,tfc,vgg7,bert-tiny-mx"
repeat=1
append=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --append) append=1; shift ;;
    --steps|--vgg-steps|--bert-steps|--rows) extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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
if [ "$append" = 1 ] && [ -f "$here/results.jsonl" ]; then cp "$here/results.jsonl" "$raw"; fi
# The CPU (model, vector extensions), the load when the run starts and the PyTorch build.
"$PYTHON" "$here/machine.py" | tee -a "$raw" >&2
for t in $threads; do
  for r in $(seq 1 "$repeat"); do
    for m in ${models//,/ }; do
      echo "threads=$t run=$r $m" >&2
      "$bin" --json --threads "$t" --models "$m" ${extra[@]+"${extra[@]}"} | tee -a "$raw" >&2
      "$PYTHON" "$here/pytorch_ref.py" --threads "$t" --models "$m" ${extra[@]+"${extra[@]}"} | tee -a "$raw" >&2
    done
  done
done
cp "$raw" "$here/results.jsonl"
"$PYTHON" "$here/table.py" "$raw" | tee "$here/results.md"
