"""MASE lab 3 with mase_rs: search for the best quantization of jsc-toy.

Code tasks reproduced:
- a hand-written brute-force loop over `quantize_transform_pass` configs (the (width,
  frac_width) pairs of lab 3 for the inputs and the weights of every Linear layer: 16 points),
  with your own runner: accuracy on a few batches and the average weight width;
- the same loop driven by mase-rs's samplers through `Study.ask()` / `Study.tell()` (brute
  force visits the same 16 points; TPE, Optuna-style);
- `search(...)` on lab 3's TOML with your runner registered under the config's runner name.

Run: `python python/examples/lab3.py` (after `pip install .`).
"""

import copy
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import REPO, use_jsc_data  # noqa: E402

import mase_rs  # noqa: E402
from mase_rs import MaseDataModule, MaseGraph, Study, get_model  # noqa: E402
from mase_rs.passes.graph import add_common_metadata_analysis_pass, init_metadata_analysis_pass, quantize_transform_pass  # noqa: E402
from mase_rs.passes.graph.utils import get_mase_op  # noqa: E402

PAIRS = [(16, 8), (8, 6), (8, 4), (4, 2)]
BATCHES = 4


def search_spaces():
    """Lab 3's list of quantize_transform_pass arguments: every (data_in, weight) pair."""
    spaces = []
    for (dw, df), (ww, wf) in itertools.product(PAIRS, PAIRS):
        cfg = {"name": "integer", "data_in_width": dw, "data_in_frac_width": df, "weight_width": ww,
               "weight_frac_width": wf, "bias_width": 8, "bias_frac_width": 4}
        spaces.append({"by": "type", "default": {"config": {"name": None}}, "linear": {"config": cfg}})
    return spaces


def my_runner(mg, batches):
    """Accuracy on a few batches and the mean width of the Linear weights."""
    correct = total = 0
    for x, y in batches:
        pred = np.asarray(mg(x)).argmax(1)
        correct += int((pred == np.asarray(y)).sum())
        total += len(y)
    widths = []
    for node in mg.nodes:
        if node.op == "call_module" and get_mase_op(node) == "linear":
            w = node.meta["mase"].parameters["common"]["args"]["weight"]
            widths.append(w["precision"][0] if w["type"] != "float" else 32)
    return {"accuracy": correct / total, "average_bitwidth": float(np.mean(widths))}


def brute_force(mg, batches):
    """The hand-written loop: quantize a copy of the model with each config and run the runner."""
    recorded = []
    for config in search_spaces():
        candidate, _ = quantize_transform_pass(copy.deepcopy(mg), config)
        candidate.model.eval()
        recorded.append((config["linear"]["config"], my_runner(candidate, batches)))
    return recorded


def lab3_space():
    return mase_rs.study._read_toml(str(REPO / "configs" / "lab3_tied_pairs_search.toml"))["search"]["search_space"]


def with_study(mg, batches, sampler, n_trials=None):
    """The same loop with mase-rs's sampler proposing the configs (ask/tell)."""
    study = Study(lab3_space(), model=mg, sampler=sampler, direction="maximize", seed=1)
    n = 0
    while n_trials is None or n < n_trials:
        trial = study.ask()
        if trial is None:
            break
        metrics = my_runner(study.build(trial), batches)
        study.tell(trial, metrics["accuracy"] - 0.01 * metrics["average_bitwidth"])
        n += 1
    return study


def main():
    use_jsc_data()
    dm = MaseDataModule(name="jsc", batch_size=128, model_name="jsc-toy", num_workers=0)
    dm.prepare_data()
    dm.setup()
    batches = list(itertools.islice(dm.val_dataloader(), BATCHES))
    mg = MaseGraph(model=get_model("jsc-toy", "cls", dm.dataset_info, seed=1))
    mg, _ = init_metadata_analysis_pass(mg, None)
    mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": batches[0][0]}, "add_value": False})
    mg.model.eval()

    recorded = brute_force(mg, batches)
    print("hand-written brute force (data_in, weight) -> accuracy, average weight width:")
    for cfg, m in recorded:
        print(f"  ({cfg['data_in_width']:2}, {cfg['data_in_frac_width']}) ({cfg['weight_width']:2}, {cfg['weight_frac_width']})"
              f" -> {m['accuracy']:.4f}, {m['average_bitwidth']:.0f}")
    assert len(recorded) == 16
    assert [m["average_bitwidth"] for _, m in recorded] == [float(w) for _ in PAIRS for w, _f in PAIRS]

    brute = with_study(mg, batches, "brute")
    assert len(brute.trials) == 16
    scores = {(c["data_in_width"], c["data_in_frac_width"], c["weight_width"], c["weight_frac_width"]):
              m["accuracy"] - 0.01 * m["average_bitwidth"] for c, m in recorded}
    for t in brute.trials:
        d, w = t.params["linear/config/data_in"], t.params["linear/config/weight"]
        assert abs(t.value - scores[(d[0], d[1], w[0], w[1])]) < 1e-12
    best = brute.best_trial
    print(f"Study(brute): 16 trials, best {best.params} value {best.value:.4f}")
    assert best.value == max(scores.values())

    tpe = with_study(mg, batches, "tpe", n_trials=8)
    print(f"Study(tpe): 8 trials, best value {tpe.best_trial.value:.4f}")

    # The config's software runner becomes yours: its table (data_loader, num_samples) is `config`.
    @mase_rs.register_runner("my_runner", metrics=["accuracy"])
    def runner(candidate, data_module, config):
        n = config["num_samples"] // data_module.batch_size
        return {"accuracy": my_runner(candidate, list(itertools.islice(data_module.val_dataloader(), n)))["accuracy"]}

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "lab3.toml"
        text = (REPO / "configs" / "lab3_tied_pairs_search.toml").read_text()
        config.write_text(text.replace("sw_runner.basic_evaluation", "sw_runner.my_runner"))
        r = mase_rs.search(config, project_dir=tmp, batch_size=128)
    mase_rs.unregister_runner("my_runner")
    study = r["studies"][0]
    print(f"search(...) with my_runner: {study['complete']} trials, stop: {study['stop']}")
    assert study["complete"] == 16
    return {"recorded": recorded, "brute": brute, "tpe": tpe, "search": r}


if __name__ == "__main__":
    main()
