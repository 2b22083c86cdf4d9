"""User code in `transform(...)` and `search(...)`: a Python pass from a `[passes.<name>]`
table, a Python runner and an Optuna-style objective in a search, and their errors."""

import json

import numpy as np
import pytest

import mase_rs
from helpers import mixed_precision_space, toml_text, weight_width, write_toml
from mase_rs.passes.graph.utils import get_mase_op


@pytest.fixture
def plugins():
    yield
    for name in list(mase_rs.registered_passes()):
        mase_rs.unregister_pass(name)
    for name in list(mase_rs.registered_runners()):
        mase_rs.unregister_runner(name)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_python_pass_runs_from_its_table_between_builtin_passes(tmp_path, plugins):
    seen = {}

    @mase_rs.register_pass("widths")
    def widths(mg, pass_args):
        # The graph the pipeline holds: quantized by the table before, with its metadata.
        seen["args"] = pass_args
        fc = [n for n in mg.nodes if get_mase_op(n) == "linear"][0]
        w = fc.meta["mase"].parameters["common"]["args"]["weight"]
        fc.meta["mase"].parameters["software"]["mark"] = {"by": "widths"}
        return mg, {"weight": [w["type"], w["precision"]], "scale": pass_args["scale"] * 2}

    linear = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 6, "weight_frac_width": 3,
              "bias_width": 8, "bias_frac_width": 4}
    quantize = {"by": "type", "default": {"config": {"name": "NA"}}, "linear": {"config": linear}}
    config = write_toml(tmp_path, "c.toml", {"passes": {"quantize": quantize, "widths": {"scale": 1.5}, "save_node_meta_param": {}}})
    r = mase_rs.transform(config, "jsc-tiny", "jsc", project_dir=tmp_path, project="p")
    assert seen["args"] == {"scale": 1.5}
    mine = [p for p in r["passes"] if p["name"] == "widths"][0]
    assert mine["report"] == {"weight": ["integer", [6, 3]], "scale": 3.0}
    # The pass's metadata edit reached the graph the next pass and the saved model see.
    saved = mase_rs.load_model(r["checkpoint"])
    fc = [n for n in saved.nodes if get_mase_op(n) == "linear"][0]
    assert fc.meta["mase"].parameters["software"]["mark"] == {"by": "widths"}
    assert fc.meta["mase"].parameters["common"]["args"]["weight"]["precision"] == [6, 3]


def my_flops(mg, pass_args):
    """FLOPs per sample as the flops pass counts them (linear: one MAC per weight and row,
    batch norm: 4 per input value, ReLU: 1)."""
    per_input = {"batch_norm1d": 4, "relu": 1}
    nodes = []
    for node in mg.nodes:
        if node.op != "call_module":
            continue
        op = get_mase_op(node)
        shape = node.meta["mase"].parameters["common"]["args"]["data_in_0"]["shape"]
        per_sample = int(np.prod(shape[1:]))
        if op == "linear":
            flops = node.module["in_features"] * node.module["out_features"] * (per_sample // node.module["in_features"])
        else:
            flops = per_input[op] * per_sample
        nodes.append({"name": node.name, "flops": flops})
    return mg, {"nodes": nodes, "total": {"flops": sum(n["flops"] for n in nodes)}}


@pytest.mark.parametrize("model", ["jsc-tiny", "jsc-toy", "jsc-three-linear"])
def test_python_flops_pass_agrees_with_builtin_flops(tmp_path, plugins, model):
    mase_rs.register_pass("my_flops", my_flops)
    config = write(tmp_path, "f.toml", "[passes.my_flops]\n\n[passes.flops]\n")
    r = mase_rs.transform(config, model, "jsc", project_dir=tmp_path, project="f")
    mine, builtin = r["passes"][0]["report"], r["passes"][1]["report"]
    ours = {n["name"]: n["flops"] for n in mine["nodes"]}
    theirs = {n["name"]: n["flops"] for n in builtin["nodes"] if n["name"] in ours}
    assert ours == theirs and len(ours) >= 4
    assert mine["total"]["flops"] == builtin["total"]["flops"]


def test_pass_named_by_pass_key_and_passes_argument(tmp_path, plugins):
    calls = []

    def count(mg, pass_args):
        calls.append(pass_args["n"])
        return mg, {"n": pass_args["n"]}

    config = write(tmp_path, "k.toml", '[passes.first]\npass = "count"\nn = 1\n\n[passes.second]\npass = "count"\nn = 2\n')
    r = mase_rs.transform(config, "jsc-tiny", "jsc", passes={"count": count}, project_dir=tmp_path, project="k")
    assert calls == [1, 2]
    assert [(p["name"], p["pass"], p["report"]) for p in r["passes"]] == [("first", "count", {"n": 1}), ("second", "count", {"n": 2})]
    assert "count" not in mase_rs.registered_passes()


class Boom(Exception):
    pass


def test_pass_errors(tmp_path, plugins):
    config = write(tmp_path, "e.toml", "[passes.bad]\n")
    with pytest.raises(ValueError) as e:
        mase_rs.transform(config, "jsc-tiny", "jsc", project_dir=tmp_path)
    assert "unknown pass `bad`" in e.value.args[0] and "\n" not in e.value.args[0]

    def raises(mg, pass_args):
        raise Boom("from the pass")

    with pytest.raises(Boom, match="from the pass"):
        mase_rs.transform(config, "jsc-tiny", "jsc", passes={"bad": raises}, project_dir=tmp_path)

    def returns_info_only(mg, pass_args):
        return {"x": 1}

    with pytest.raises(TypeError, match=r"pass `bad` must return \(mg, info\), got dict"):
        mase_rs.transform(config, "jsc-tiny", "jsc", passes={"bad": returns_info_only}, project_dir=tmp_path)

    def unjsonable(mg, pass_args):
        return mg, {"x": object()}

    with pytest.raises(ValueError, match="pass `bad`: info: object values cannot be passed"):
        mase_rs.transform(config, "jsc-tiny", "jsc", passes={"bad": unjsonable}, project_dir=tmp_path)
    with pytest.raises(ValueError, match="must be letters"):
        mase_rs.register_pass("no spaces", my_flops)


SEARCH = toml_text({
    "model": "jsc-tiny",
    "dataset": "jsc",
    "seed": 0,
    "search": {
        "search_space": mixed_precision_space(weight_width=[2, 4, 8], weight_frac_width=[1], data_in_width=[8],
                                              data_in_frac_width=[4], bias_width=[8], bias_frac_width=[4]),
        "strategy": {
            "sw_runner": {"my_runner": {"scale": 10.0}},
            "setup": {"sampler": "brute", "n_trials": 10, "sum_scaled_metrics": False},
            "metrics": {"score": {"scale": 1.0, "direction": "maximize"}},
        },
    },
})


def test_python_runner_measures_each_candidate(tmp_path, plugins):
    seen = []

    @mase_rs.register_runner("my_runner", metrics=["score"])
    def my_runner(mg, data_module, config):
        x, _y = next(iter(data_module.val_dataloader()))
        assert mg(x).shape == (len(x), 5)
        seen.append((weight_width(mg), data_module.name, config))
        return {"score": config["scale"] * weight_width(mg), "extra": 1}

    config = write(tmp_path, "s.toml", SEARCH)
    r = mase_rs.search(config, project_dir=tmp_path, project="s")
    study = r["studies"][0]
    assert (study["complete"], study["stop"]) == (3, "exhausted")
    assert sorted(w for w, _d, _c in seen) == [2, 4, 8]
    assert all(d == "jsc" and c == {"scale": 10.0} for _w, d, c in seen)
    best = json.loads((tmp_path / "s/software/search_ckpts/best.json").read_text())
    assert [t["value"] for t in best.values()] == [[80.0]]
    assert [t["software_metrics"] for t in best.values()] == [{"score": 80.0, "extra": 1.0}]


def test_objective_replaces_the_configured_metrics(tmp_path, plugins):
    def objective(mg, data_module, config):
        return -abs(weight_width(mg) - 4)

    config = write(tmp_path, "o.toml", SEARCH.replace("my_runner", "basic_evaluation").replace("scale = 10.0", "num_samples = 64"))
    r = mase_rs.search(config, objective=objective, direction="maximize", project_dir=tmp_path, project="o")
    best = r["studies"][0]["best"]
    assert [t["value"] for t in best.values()] == [[0.0]]
    assert [t["sampled_config"]["seq_blocks_2"]["config"]["weight_width"] for t in best.values()] == [4]


def test_runner_errors(tmp_path, plugins):
    config = write(tmp_path, "s.toml", SEARCH)
    with pytest.raises(ValueError) as e:
        mase_rs.search(config, project_dir=tmp_path)
    assert "unknown software runner `my_runner`" in e.value.args[0]
    with pytest.raises(ValueError, match="metric `score` is reported by no configured runner; the runners report: other"):
        mase_rs.search(config, runners={"my_runner": (lambda mg, dm, c: {"other": 1}, ["other"])}, project_dir=tmp_path)
    with pytest.raises(ValueError, match="runner `my_runner`: registered with metric `score`, but returned only: other"):
        mase_rs.search(config, runners={"my_runner": (lambda mg, dm, c: {"other": 1}, ["score"])}, project_dir=tmp_path)
    with pytest.raises(ValueError, match="metric `score`"):
        mase_rs.search(config, runners={"my_runner": lambda mg, dm, c: {"other": 1}}, project_dir=tmp_path)

    def boom(mg, dm, c):
        raise Boom("from the runner")

    with pytest.raises(Boom, match="from the runner"):
        mase_rs.search(config, runners={"my_runner": boom}, project_dir=tmp_path)
    with pytest.raises(TypeError, match="metric `score` must be a number, got str"):
        mase_rs.search(config, runners={"my_runner": lambda mg, dm, c: {"score": "high"}}, project_dir=tmp_path)


def test_a_panic_in_an_action_is_one_runtime_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MASE_FAILPOINT", "panic-in-action")
    config = write(tmp_path, "p.toml", "[passes.flops]\n")
    with pytest.raises(RuntimeError) as e:
        mase_rs.transform(config, "jsc-tiny", "jsc", project_dir=tmp_path)
    line = e.value.args[0]
    assert line.startswith("internal error in transform: failpoint panic-in-action at crates/cli/src/lib.rs:") and "\n" not in line


def test_a_pass_may_run_a_transform_of_its_own(tmp_path, plugins):
    inner = write(tmp_path, "inner.toml", "[passes.flops]\n")

    @mase_rs.register_pass("nested")
    def nested(mg, pass_args):
        r = mase_rs.transform(inner, "jsc-tiny", "jsc", project_dir=tmp_path, project="inner")
        return mg, {"inner_flops": r["passes"][0]["report"]["total"]["flops"]}

    outer = write(tmp_path, "outer.toml", "[passes.nested]\n\n[passes.flops]\n")
    r = mase_rs.transform(outer, "jsc-tiny", "jsc", project_dir=tmp_path, project="outer")
    assert [p["name"] for p in r["passes"]] == ["nested", "flops"]
    assert r["passes"][0]["report"]["inner_flops"] == r["passes"][1]["report"]["total"]["flops"]
