"""Helpers the Python tests share: configs written from Python tables, and a graph's weight width."""

import json

from mase_rs.passes.graph.utils import get_mase_op


def toml_text(table):
    """`table` (nested dicts of strings, numbers, booleans and lists) as TOML text: one `[a.b]`
    header per dict, in insertion order, so that a `[passes]` table keeps its pass order."""
    return "\n".join(toml_lines(table, "")) + "\n"


def toml_lines(table, prefix):
    lines = [f"[{prefix}]"] if prefix else []
    lines += [f"{key} = {json.dumps(value)}" for key, value in table.items() if not isinstance(value, dict)]
    for key, value in table.items():
        if isinstance(value, dict):
            lines += toml_lines(value, f"{prefix}.{key}" if prefix else key)
    return lines


def write_toml(tmp_path, name, table):
    """`table` written as TOML to `tmp_path / name`; returns the path."""
    path = tmp_path / name
    path.write_text(toml_text(table))
    return path


def mixed_precision_space(**linear):
    """The by-type mixed-precision space over jsc-tiny's Linear: unquantized by default, and the
    `integer` choices of `linear` (lists of widths) for every Linear."""
    return {
        "name": "graph/quantize/mixed_precision_ptq",
        "setup": {"by": "type"},
        "seed": {"default": {"config": {"name": ["NA"]}}, "linear": {"config": {"name": ["integer"], **linear}}},
    }


def weight_width(mg):
    """The weight width of the graph's first Linear."""
    fc = [n for n in mg.nodes if get_mase_op(n) == "linear"][0]
    return fc.meta["mase"].parameters["common"]["args"]["weight"]["precision"][0]


def grads_of(model, x, y):
    """The cross-entropy loss of `model(x)` against labels `y` and every parameter's gradient."""
    import torch.nn.functional as F

    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_equals_pytorch_on_both_engines(user, x, y, tol=1e-5):
    """`MaseGraph(model=user).model` gives `user`'s outputs on `x` and its training step's loss
    and gradients (labels `y`) to `tol`, on the executor and with `set_backend("torch")`; the
    backend is left at "rust"."""
    import copy

    import torch

    import mase_rs
    from mase_rs import MaseGraph

    want = user(x)
    loss_t, grads_t = grads_of(user, x, y)
    for backend in ("rust", "torch"):
        mg = MaseGraph(model=copy.deepcopy(user))
        mase_rs.set_backend(backend)
        try:
            torch.testing.assert_close(mg.model(x), want, rtol=tol, atol=tol, msg=backend)
            loss, grads = grads_of(mg.model, x, y)
            assert abs(loss - loss_t) <= tol * max(1.0, abs(loss_t)), backend
            assert grads.keys() == grads_t.keys()
            for name in grads:
                torch.testing.assert_close(grads[name], grads_t[name], rtol=tol, atol=tol, msg=f"{backend}: {name}")
        finally:
            mase_rs.set_backend("rust")
