"""mase_rs from Python against the same code in PyTorch eager, MASE style, in one run.

usage: python bench/python_bench.py [--repeats N] [--threads N]

Needs `mase_rs` (pip install .) and torch in the same environment (a venv made with
`--system-site-packages` sees a system torch). Cases, on jsc-toy with the weights of
`get_model("jsc-toy", seed=1)` copied into the PyTorch model:

- forward: one eval-mode forward of a 256-row batch: `mg(x)` from Python, the same call timed in
  Rust (`_time_forward`, no Python in the loop), and `model(x)` under `torch.no_grad()`;
- lab 3 loop: lab 3's hand-written brute force, 16 configs (the (width, frac_width) pairs for
  data_in and weight of every Linear): copy the model, quantize it (`quantize_transform_pass`;
  in PyTorch MASE's way, each `nn.Linear` replaced by a fake-quantizing `LinearInteger`), and
  evaluate accuracy on 4 batches of 256;
- torch loop: a plain PyTorch training loop (`torch.optim.Adam`, `F.cross_entropy`,
  `loss.backward()`, `opt.step()`) over 4 batches of 256 rows, on `mg.model` (forward and
  backward on mase-rs's executor) and on the equivalent `nn.Module`.

Each figure is the median of `--repeats` timed runs after a warm-up; the same threads count for
both sides (`--threads`, default 1). Prints a table and one JSON line.
"""

import contextlib
import copy
import io
import itertools
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn

from pathlib import Path

import mase_rs
from mase_rs import MaseGraph, get_dataset_info, get_model
from mase_rs.passes.graph import quantize_transform_pass
from pytorch_ref import LinearInteger, jsc_dataset, zoo_module

REPO = Path(__file__).resolve().parents[1]
PAIRS = [(16, 8), (8, 6), (8, 4), (4, 2)]
ROWS, BATCHES = 256, 4


def arg(name, default):
    a = sys.argv
    return type(default)(a[a.index(name) + 1]) if name in a else default


def torch_jsc_toy(state):
    model = zoo_module("jsc-toy", (16,), 5)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    return model.eval()


def configs():
    out = []
    for (dw, df), (ww, wf) in itertools.product(PAIRS, PAIRS):
        out.append({"name": "integer", "data_in_width": dw, "data_in_frac_width": df, "weight_width": ww,
                    "weight_frac_width": wf, "bias_width": 8, "bias_frac_width": 4})
    return out


def batches():
    """bench/pytorch_ref.py's seeded jet-shaped rows, as numpy batches."""
    x, y = (t.numpy() for t in jsc_dataset(ROWS * BATCHES))
    return [(x[i * ROWS:(i + 1) * ROWS], y[i * ROWS:(i + 1) * ROWS]) for i in range(BATCHES)]


def lab3_mase_rs(mg, data):
    accs = []
    for cfg in configs():
        cand, _ = quantize_transform_pass(copy.deepcopy(mg), {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": cfg}})
        cand.model.eval()
        correct = sum(int((cand(x).argmax(1) == y).sum()) for x, y in data)
        accs.append(correct / (ROWS * BATCHES))
    return accs


def lab3_torch(model, data):
    accs = []
    with torch.no_grad():
        for cfg in configs():
            cand = copy.deepcopy(model)
            for i, m in enumerate(cand.seq_blocks):
                if isinstance(m, nn.Linear):
                    cand.seq_blocks[i] = LinearInteger(m, cfg)
            correct = sum(int((cand(x).argmax(1) == y).sum()) for x, y in data)
            accs.append(correct / (ROWS * BATCHES))
    return accs


def torch_loop(model, data):
    """One epoch of a plain PyTorch loop; the optimizer is made once per model."""
    opt = model.__dict__.setdefault("_bench_opt", torch.optim.Adam(model.parameters(), lr=1e-3))
    model.train()
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def timed(fn, repeats, inner=1):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def main():
    # The data set gives the model its input width; the shipped jsc sample is enough.
    if not os.environ.get("MASE_DATA_DIR") and not (REPO / "data" / "jsc").is_dir():
        os.environ["MASE_DATA_DIR"] = str(REPO / "crates" / "io" / "tests" / "fixtures")
    repeats, threads = arg("--repeats", 7), arg("--threads", 1)
    torch.set_num_threads(threads)
    mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc"), seed=1))
    mg._native.configure(threads=threads)
    mg.model.eval()
    model = torch_jsc_toy(mg.state_dict())
    data = batches()
    x = data[0][0]
    xt = torch.from_numpy(x)
    with torch.no_grad():
        np.testing.assert_allclose(mg(x), model(xt).numpy(), rtol=1e-4, atol=1e-5)

    inner = 500
    py_call = timed(lambda: mg(x), repeats, inner)
    rust_call = statistics.median(mg._native._time_forward(x, inner * repeats))
    with torch.no_grad():
        torch_call = timed(lambda: model(xt), repeats, inner)

    torch_data = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in data]
    with contextlib.redirect_stdout(io.StringIO()):
        acc_rs = lab3_mase_rs(mg, data)
    acc_pt = lab3_torch(model, torch_data)
    # Same formats, same data: the accuracies agree but for ties at a rounding boundary.
    assert max(abs(a - b) for a, b in zip(acc_rs, acc_pt)) <= 2 / (ROWS * BATCHES), (acc_rs, acc_pt)
    # The quantize pass prints its table, as MASE's lab shows it; the timed loops print nothing.
    with contextlib.redirect_stdout(io.StringIO()):
        loop_rs = timed(lambda: lab3_mase_rs(mg, data), repeats)
    loop_pt = timed(lambda: lab3_torch(model, torch_data), repeats)

    train_mg = MaseGraph(model=get_model("jsc-toy", "cls", get_dataset_info("jsc"), seed=1))
    train_mg._native.configure(threads=threads)
    train_pt = torch_jsc_toy(train_mg.state_dict())
    loop_data = [(xb, yb.long()) for xb, yb in torch_data]
    train_rs_t = timed(lambda: torch_loop(train_mg.model, loop_data), repeats, 20)
    train_pt_t = timed(lambda: torch_loop(train_pt, loop_data), repeats, 20)

    rows = [
        ("forward, 256 rows: mase_rs mg(x) from Python", py_call),
        ("forward, 256 rows: the same call timed in Rust", rust_call),
        ("forward, 256 rows: PyTorch eager model(x)", torch_call),
        ("lab 3 loop (16 configs, 4 x 256 rows): mase_rs", loop_rs),
        ("lab 3 loop (16 configs, 4 x 256 rows): PyTorch eager, MASE style", loop_pt),
        ("torch loop, Adam, 4 x 256 rows: over mg.model (mase-rs executor)", train_rs_t),
        ("torch loop, Adam, 4 x 256 rows: over the nn.Module (PyTorch eager)", train_pt_t),
    ]
    print(f"mase_rs {mase_rs.__name__}, torch {torch.__version__}, {threads} thread(s), medians of {repeats} runs")
    for name, t in rows:
        print(f"| {name} | {t * 1e6:,.1f} us |")
    ratios = {
        "python_over_rust_forward": py_call / rust_call,
        "torch_over_mase_rs_forward": torch_call / py_call,
        "torch_over_mase_rs_lab3_loop": loop_pt / loop_rs,
        "torch_over_mase_rs_torch_loop": train_pt_t / train_rs_t,
    }
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")
    print(json.dumps({"threads": threads, "repeats": repeats, "torch": torch.__version__,
                      "seconds": {name: t for name, t in rows}, "ratios": ratios}))


if __name__ == "__main__":
    main()
