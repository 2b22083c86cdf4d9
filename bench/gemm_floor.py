"""How fast could an eval batch be? The matrix products of each model's forward pass, timed alone
in PyTorch (one thread by default), against the whole eval batch of pytorch_ref.py.

usage: gemm_floor.py [--threads N] [--bert-steps S]
For each model: the forward GEMM shapes (M, K, N) at the benchmark's batch, their FLOPs, the
best rate PyTorch reaches on any of them, and the floor = FLOPs / that rate. An engine that
spends no time outside its GEMMs and runs them at that rate still needs the floor, so
PyTorch's eval time / floor bounds the eval speed-up any engine can show on this machine.

Then bert-tiny-mx's training step (issue 20's 3x goal): the products of one step at batch 64,
forward and both gradients, timed alone, beside PyTorch's whole step (`pytorch_ref.py`'s model
and step, timed in the same process). The gradient products take the float32 output gradient
(the straight-through estimator passes it unquantized), so they are float32 products whatever
the forward does: PyTorch's step / their floor bounds the training speed-up of any engine that
gives PyTorch's float32 gradients.
"""
import time

import numpy as np
import torch
import torch.nn.functional as F

from pytorch_ref import arg, build

# Forward products (rows, inner, cols) of one batch; convs as im2col GEMMs (per sample x batch).
SHAPES = {
    "jsc-tiny": [(256, 16, 5)],
    "jsc-toy": [(256, 16, 8), (256, 8, 8), (256, 8, 5)],
    "jsc-three-layer": [(256, 16, 64), (256, 64, 32), (256, 32, 32), (256, 32, 5)],
    "tfc": [(256, 784, 64), (256, 64, 64), (256, 64, 64), (256, 64, 10)],
}


def best_of(f, reps, warmup=10):
    """The best time of `reps` calls of `f`, after `warmup` untimed ones."""
    for _ in range(warmup):
        f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def best_time(m, k, n, reps):
    a, b = torch.randn(m, k), torch.randn(k, n)
    return best_of(lambda: a @ b, reps)


def bert_tiny_products(batch=64, seq=64, hidden=128, heads=2, inner=512, layers=2, classes=10):
    """The matrix products of bert-tiny's forward pass as (count, rows, inner, cols): per encoder
    layer the Q, K, V and output projections and the two feed-forward linears over every token,
    the scores and the weighted values of every head, then the pooler and the classifier."""
    tokens, dh = batch * seq, hidden // heads
    per_layer = [(4, tokens, hidden, hidden), (1, tokens, hidden, inner), (1, tokens, inner, hidden),
                 (batch * heads, seq, dh, seq), (batch * heads, seq, seq, dh)]
    return per_layer * layers + [(1, batch, hidden, hidden), (1, batch, hidden, classes)]


def gradient_products(forward):
    """The two gradient products of each forward product `x[M, K] @ w[K, N]`: the input's
    `dy[M, N] @ w^T` and the weight's `x^T @ dy`, the same FLOPs each."""
    return [p for c, m, k, n in forward for p in ((c, m, n, k), (c, k, m, n))]


def products_time(products, reps):
    """Best time of each product, batched ones as one `torch.bmm`, summed over the list."""
    total = 0.0
    for c, m, k, n in products:
        a, b = torch.randn(c, m, k), torch.randn(c, k, n)
        f = (lambda: torch.bmm(a, b)) if c > 1 else (lambda: a[0] @ b[0])
        total += best_of(f, reps, warmup=3)
    return total


def product_flops(products):
    return sum(2 * c * m * k * n for c, m, k, n in products)


def bert_step_time(steps):
    """Median time of PyTorch's bert-tiny-mx training step, as `pytorch_ref.py` runs it."""
    torch.manual_seed(42)
    m = build("bert-tiny-mx")
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    r = np.random.default_rng(7)
    x = torch.from_numpy(r.integers(0, 17, (64, 64)).astype(np.float32))
    y = torch.from_numpy(r.integers(0, 10, 64).astype(np.int64))
    ts = []
    for s in range(steps + 2):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()
        opt.step()
        if s >= 2:
            ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def bert_train_floor(peak, steps):
    forward = bert_tiny_products()
    grads = gradient_products(forward)
    step = bert_step_time(steps)
    print(f"bert-tiny-mx training step, batch 64: PyTorch {step * 1e3:.1f} ms")
    for label, prods in (("forward products", forward), ("gradient products", grads),
                         ("all products", forward + grads)):
        alone = products_time(prods, 20)
        rate = max(peak, product_flops(prods) / alone)
        floor = product_flops(prods) / rate
        print(f"  {label:18} {product_flops(prods) / 1e9:6.2f} GFLOP  alone {alone * 1e3:7.1f} ms  "
              f"floor at {rate / 1e9:.0f} GFLOP/s {floor * 1e3:7.1f} ms  "
              f"PyTorch step / floor {step / floor:5.2f}x")


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
    bert_train_floor(peak, arg("--bert-steps", 10))


if __name__ == "__main__":
    main()
