#!/usr/bin/env bash
# Trials per second of `ch search` against bench/optuna_ref.py (Optuna TPE + PyTorch fake-quant
# evaluation of 512 samples per trial) on the same space: the lab 3 search of jsc-tiny
# (bench/search_bench.toml). Both run one thread, back to back; writes bench/search_results.md.
#
# usage: bench/search.sh [--trials N]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
trials=200
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials="$2"; shift 2 ;;
    *) echo "search.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
PYTHON="${PYTHON:-/work/pyenv/bin/python}"
cd "$root"
cargo build --release -p mase-cli >&2
work="$(mktemp -d)"
mkdir -p "$work/data/jsc"
cp crates/io/tests/fixtures/jsc/jsc_fixture.h5 "$work/data/jsc/"
rust="$(cd "$work" && "$root/target/release/ch" search --config "$here/search_bench.toml" --data-dir "$work/data" --n-trials "$trials" --threads 1 --json)"
rs_s="$(echo "$rust" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["studies"][0]["seconds"])')"
py="$("$PYTHON" "$here/optuna_ref.py" --trials "$trials" --threads 1)"
py_s="$(echo "$py" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')"
"$PYTHON" - "$trials" "$rs_s" "$py_s" "$py" <<'PY' | tee "$here/search_results.md"
import json, sys
n, rs, py, meta = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
print("| side | trials | seconds | trials/s |")
print("|---|---|---|---|")
print(f"| ch search (TPE, SQLite commit per trial) | {n} | {rs:.3f} | {n/rs:.1f} |")
print(f"| Optuna {meta['optuna']} TPE + PyTorch {meta['torch']} | {n} | {py:.3f} | {n/py:.1f} |")
print(f"\nspeed-up: {py/rs:.1f}x (one thread each, same machine, same run)")
PY
rm -rf "$work"
