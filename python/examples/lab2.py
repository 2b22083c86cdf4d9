"""MASE lab 2 with mase_rs: the graph, its metadata, quantization, and a pass of your own.

Code tasks reproduced:
- Q4: traverse the original and the quantized graph node by node and show what changed;
- Q6: check that the weights of the quantized layers are on the integer grid (by hand, and with
  `verify_quantization_analysis_pass`);
- optional task: a FLOPs pass written in Python, registered, run from a `[passes.my_flops]`
  table by `transform(...)`, agreeing with the built-in `flops` pass.

Run: `python python/examples/lab2.py` (after `pip install .`).
"""

import copy
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import use_jsc_data  # noqa: E402

import mase_rs  # noqa: E402
from mase_rs import MaseDataModule, MaseGraph, get_model  # noqa: E402
from mase_rs.passes.graph import (  # noqa: E402
    add_common_metadata_analysis_pass,
    add_software_metadata_analysis_pass,
    flops_analysis_pass,
    init_metadata_analysis_pass,
    quantize_transform_pass,
    report_graph_analysis_pass,
    summarize_quantization_analysis_pass,
    verify_quantization_analysis_pass,
)
from mase_rs.passes.graph.utils import get_mase_op, get_mase_type, get_node_actual_target  # noqa: E402

WIDTH, FRAC = 8, 4


def integer_grid(x, width, frac):
    """MASE's integer quantizer: round to the nearest multiple of 2^-frac, clamp to `width` bits."""
    scale = 2.0**frac
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    return np.clip(np.round(x * scale), lo, hi) / scale


def prepared_graph(dm):
    mg = MaseGraph(model=get_model("jsc-toy", "cls", dm.dataset_info, seed=1))
    mg, _ = init_metadata_analysis_pass(mg, None)
    dummy_in = {"x": next(iter(dm.train_dataloader()))[0]}
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": dummy_in, "add_value": False})
    mg, _ = add_software_metadata_analysis_pass(mg, None)
    return mg


def quantize(mg):
    cfg = {"name": "integer"}
    for k in ("data_in", "weight", "bias"):
        cfg[f"{k}_width"], cfg[f"{k}_frac_width"] = WIDTH, FRAC
    return quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": cfg}})


def traverse(ori_mg, mg):
    """Q4: both graphs node by node; returns the nodes whose weight format changed."""
    changed = []
    for ori, new in zip(ori_mg.fx_graph.nodes, mg.fx_graph.nodes):
        assert ori.name == new.name and get_mase_op(ori) == get_mase_op(new)
        if new.op != "call_module":
            continue
        a = ori.meta["mase"].parameters["common"]["args"].to_dict()
        b = new.meta["mase"].parameters["common"]["args"].to_dict()
        before = {k: (v.get("type"), v.get("precision")) for k, v in a.items() if isinstance(v, dict)}
        after = {k: (v.get("type"), v.get("precision")) for k, v in b.items() if isinstance(v, dict)}
        print(f"{new.name:14} {get_mase_type(new):20} {get_mase_op(new):13} {before.get('weight')} -> {after.get('weight')}")
        if before.get("weight") != after.get("weight"):
            changed.append(new.name)
    return changed


def linear_features(target):
    """`(in_features, out_features)` of a linear node's target: a `torch.nn.Linear` when torch is
    installed (as in MASE), the layer as a dict otherwise."""
    if isinstance(target, dict):
        return target["in_features"], target["out_features"]
    return target.in_features, target.out_features


def weights_on_grid(mg, x):
    """Q6: the quantized layers compute with weights on the grid: for each quantized linear
    layer, the output of the quantized model equals a numpy forward with gridded weights."""
    sd = mg.state_dict()
    names = [n.name for n in mg.nodes if get_mase_op(n) == "linear"]
    for name in names:
        target = get_node_actual_target([n for n in mg.nodes if n.name == name][0])
        key = [n.target for n in mg.nodes if n.name == name][0]
        w = np.asarray(sd[f"{key}.weight"])
        assert w.shape == linear_features(target)[::-1]
        assert not np.array_equal(integer_grid(w, WIDTH, FRAC), w), "float weights are off the grid"
    _, info = verify_quantization_analysis_pass(mg, {})
    return names, info["off_grid"]


def my_flops(mg, pass_args):
    """A FLOPs pass in Python, counting as mase-rs's `flops` pass does per sample: a linear layer
    one multiply-add per weight per row, batch norm 4 operations per input value, ReLU 1."""
    per_input = {"batch_norm1d": 4, "relu": 1}
    nodes, total = [], 0
    for node in mg.fx_graph.nodes:
        if node.op != "call_module":
            continue
        op = get_mase_op(node)
        shape = node.meta["mase"].parameters["common"]["args"]["data_in_0"]["shape"]
        per_sample = int(np.prod(shape[1:]))
        if op == "linear":
            in_features, out_features = linear_features(get_node_actual_target(node))
            flops = in_features * out_features * (per_sample // in_features)
        else:
            flops = per_input.get(op, 0) * per_sample
        nodes.append({"name": node.name, "mase_op": op, "flops": flops})
        total += flops
    return mg, {"nodes": nodes, "total": {"flops": total}}


def main():
    use_jsc_data()
    dm = MaseDataModule(name="jsc", batch_size=64, model_name="jsc-toy", num_workers=0)
    dm.prepare_data()
    dm.setup()
    mg = prepared_graph(dm)
    _, graph_report = report_graph_analysis_pass(mg, None)
    ori_mg = copy.deepcopy(mg)
    mg, qinfo = quantize(mg)
    mg.model.eval()
    ori_mg.model.eval()
    summarize_quantization_analysis_pass(ori_mg, mg)

    print("\nQ4: original and quantized graphs, node by node (weight type, precision):")
    changed = traverse(ori_mg, mg)
    linear = [n.name for n in mg.nodes if get_mase_op(n) == "linear"]
    assert changed == linear, (changed, linear)

    x = np.asarray(next(iter(dm.test_dataloader()))[0], dtype=np.float32)
    print("\nQ6: weights of the quantized layers on the grid:")
    names, off_grid = weights_on_grid(mg, x)
    print(f"layers {names}: values off the {WIDTH}/{FRAC} grid: {off_grid}")
    assert off_grid == 0
    diff = float(np.abs(mg(x) - ori_mg(x)).max())
    print(f"largest output change from quantization: {diff:.4f}")
    assert diff > 0

    print("\nOptional task: a FLOPs pass in Python, run from [passes.my_flops]:")
    mase_rs.register_pass("my_flops", my_flops)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "my_flops.toml"
        config.write_text("[passes.my_flops]\n\n[passes.flops]\n")
        r = mase_rs.transform(config, "jsc-toy", "jsc", project_dir=tmp, project="lab2")
    mine, builtin = r["passes"][0]["report"], r["passes"][1]["report"]
    print(f"my_flops total: {mine['total']['flops']}, flops pass total: {builtin['total']['flops']}")
    ours = {n["name"]: n["flops"] for n in mine["nodes"]}
    theirs = {n["name"]: n["flops"] for n in builtin["nodes"] if n["flops"] or n["name"] in ours}
    assert ours == theirs, (ours, theirs)
    _, direct = flops_analysis_pass(mg, None)
    assert direct["total"]["flops"] == mine["total"]["flops"]
    mase_rs.unregister_pass("my_flops")
    return {"quantized": qinfo["quantized"], "off_grid": off_grid, "flops": mine["total"]["flops"], "nodes": graph_report}


if __name__ == "__main__":
    main()
