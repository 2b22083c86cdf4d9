"""How fast could an eval batch be? The matrix products of each model's forward pass, timed alone
in PyTorch (one thread by default), against the whole eval batch of pytorch_ref.py.

usage: gemm_floor.py [--threads N]
For each model: the forward GEMM shapes (M, K, N) at the benchmark's batch, their FLOPs, the
best rate PyTorch reaches on any of them, and the floor = FLOPs / that rate. An engine that
spends no time outside its GEMMs and runs them at that rate still needs the floor, so
PyTorch's eval time / floor bounds the eval speed-up any engine can show on this machine.
"""
import time

import torch

from pytorch_ref import arg

# Forward products (rows, inner, cols) of one batch; convs as im2col GEMMs (per sample x batch).
SHAPES = {
    "jsc-tiny": [(256, 16, 5)],
    "jsc-toy": [(256, 16, 8), (256, 8, 8), (256, 8, 5)],
    "jsc-three-layer": [(256, 16, 64), (256, 64, 32), (256, 32, 32), (256, 32, 5)],
    "tfc": [(256, 784, 64), (256, 64, 64), (256, 64, 64), (256, 64, 10)],
}


def best_time(m, k, n, reps):
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(10):
        a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return best


def main():
    torch.set_num_threads(arg("--threads", 1))
    big = best_time(1024, 1024, 1024, 5)
    peak = 2 * 1024 ** 3 / big
    print(f"PyTorch sgemm 1024^3: {peak / 1e9:.1f} GFLOP/s")
    for model, shapes in SHAPES.items():
        flops = sum(2 * m * k * n for m, k, n in shapes)
        times = [best_time(m, k, n, 200) for m, k, n in shapes]
        rate = max(peak, max(2 * m * k * n / t for (m, k, n), t in zip(shapes, times)))
        print(f"{model:16} {flops / 1e6:7.2f} MFLOP  PyTorch GEMMs alone {sum(times) * 1e6:8.1f} us  "
              f"floor at {rate / 1e9:.0f} GFLOP/s {flops / rate * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
