#!/usr/bin/env bash
# Profiles one model's training or eval half with `perf record` and prints the hottest functions
# (mase-rs's kernels show up as `<...::Linear as ...::Kernel>::forward` and the like).
#
# usage: bench/profile.sh MODEL [train|eval] [--threads N] [extra mase-bench flags]
# Needs perf (perf_event_paranoid <= 2 lets a user profile their own processes).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
model="${1:?usage: profile.sh MODEL [train|eval] [mase-bench flags]}"
phase="${2:-train}"
shift $(( $# >= 2 ? 2 : 1 ))
cd "$root"
cargo build --release -p mase-bench >&2
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
steps=3000
case "$model" in vgg7|resnet18|vit-tiny) steps=3 ;; esac
# A small data set keeps its generation (not timed, but profiled) out of the top of the list.
perf record -q -o "$out/perf.data" -g "$root/target/release/mase-bench" --models "$model" --phase "$phase" --steps "$steps" --vgg-steps "$steps" --rows "${ROWS:-8192}" "$@"
perf report -i "$out/perf.data" --no-children --stdio -g none --percent-limit 0.5 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
