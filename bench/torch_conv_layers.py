"""PyTorch's side of `crates/bench/examples/conv_layers.rs`: each convolution's forward pass,
weight gradient and input gradient in PyTorch eager, in ms and GFLOP/s of the direct
convolution's `2 N C_out C_in K K OH OW` FLOPs, so that the two tables compare layer by layer.

The forward pass is timed with the input requiring its gradient (as in training); the weight
gradient is `autograd.grad` of the weight alone minus the forward pass, and the input gradient
`autograd.grad` of both minus `autograd.grad` of the weight (the layer has no bias, as resnet18's
convolutions). Each figure is the best of `--repeat` runs.

usage: python bench/torch_conv_layers.py [--batch N] [--threads T] [--repeat R]
       [--layers CIN:COUT:SIDE[:K:STRIDE],...] (KxK, stride STRIDE, padding K // 2; 3x3 and
       stride 1 when omitted; vgg7's six layers by default)
"""

import argparse
import time

import torch

VGG7 = "3:128:32,128:128:32,128:256:16,256:256:16,256:512:8,512:512:8"


def best(f, repeat):
    t = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - start)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", default=VGG7)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"PyTorch {torch.__version__}, threads {args.threads}, batch {args.batch}")
    print(f"{'layer':>16} {'forward ms GF/s':>16} {'dW ms GF/s':>16} {'dX ms GF/s':>16}")
    totals = [0.0, 0.0, 0.0]
    for spec in args.layers.split(","):
        parts = [int(v) for v in spec.split(":")]
        if len(parts) == 3:
            parts += [3, 1]
        if len(parts) != 5:
            raise SystemExit(f"--layers: expected CIN:COUT:SIDE[:K:STRIDE], got {spec}")
        cin, cout, side, k, stride = parts
        conv = torch.nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False)
        x = torch.randn(args.batch, cin, side, side, requires_grad=True)
        dy = torch.randn_like(conv(x))
        out = dy.shape[-1]
        flops = 2.0 * args.batch * cout * cin * k * k * out * out
        fwd = best(lambda: conv(x), args.repeat)
        with_dw = best(lambda: torch.autograd.grad(conv(x), [conv.weight], dy), args.repeat)
        with_both = best(lambda: torch.autograd.grad(conv(x), [x, conv.weight], dy), args.repeat)
        # A difference at or below zero (PyTorch computed the input gradient with the weight's,
        # as it can for a thin input) is printed as "-" and counted as 0.
        secs = [fwd, with_dw - fwd, with_both - with_dw]
        name = f"{cin}->{cout}@{side}" + ("" if (k, stride) == (3, 1) else f"k{k}s{stride}")
        cells = [f"{s * 1e3:7.1f} {flops / s / 1e9:7.1f}" if s > 0 else "-" for s in secs]
        secs = [max(s, 0.0) for s in secs]
        print(f"{name:>16} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}")
        totals = [t + s for t, s in zip(totals, secs)]
    print(f"{'all (ms)':>16} {totals[0] * 1e3:>16.1f} {totals[1] * 1e3:>16.1f} {totals[2] * 1e3:>16.1f}")


if __name__ == "__main__":
    main()
