"""MASE lab 4 with mase_rs: widen the Linear layers of jsc-three-linear and search the widths.

Code tasks reproduced:
- `redefine_linear_transform_pass` with a `channel_multiplier` per layer, in a loop over the
  multipliers (lab 4 Q2: one multiplier shared by every layer), each candidate trained for a
  few epochs and tested (`train` / `test` on the transformed checkpoint);
- the same search run by `search(...)` with an Optuna-style objective written in Python
  (`objective=fn(mg, data_module, config)`), which sees each trained candidate.

Run: `python python/examples/lab4.py` (after `pip install .`).
"""

import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import REPO, use_jsc_data  # noqa: E402

import mase_rs  # noqa: E402
from mase_rs import MaseGraph, get_dataset_info, get_model  # noqa: E402
from mase_rs.passes.graph import redefine_linear_transform_pass  # noqa: E402

MULTIPLIERS = [1, 2, 4]
EPOCHS = 2


def pass_args(multiplier):
    """Lab 4's config: the first Linear widens its output, the second its input and output,
    the classifier takes the wider input."""
    return {
        "by": "name",
        "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": multiplier}},
        "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": multiplier}},
        "seq_blocks_6": {"config": {"name": "input_only"}},
    }


def trainable(mg):
    return sum(v.size for k, v in mg.state_dict().items() if not k.endswith(("running_mean", "running_var")))


def accuracy(mg, data_module, batches=None):
    correct = total = 0
    for x, y in itertools.islice(data_module.val_dataloader(), batches):
        correct += int((np.asarray(mg(x)).argmax(1) == np.asarray(y)).sum())
        total += len(y)
    return correct / total


def main():
    use_jsc_data()
    info = get_dataset_info("jsc")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in MULTIPLIERS:
            mg = MaseGraph(model=get_model("jsc-three-linear", "cls", info))
            mg, _ = redefine_linear_transform_pass(mg, pass_args(m))
            widths = [n.module["out_features"] for n in mg.nodes if n.module and n.module.get("op") == "linear"]
            ckpt = Path(tmp) / f"x{m}.ckpt"
            mg.save(ckpt)
            r = mase_rs.train("jsc-three-linear", "jsc", load=ckpt, max_epochs=EPOCHS, batch_size=64, project_dir=tmp, project=f"x{m}")
            t = mase_rs.test("jsc-three-linear", "jsc", load=r["best_checkpoint"], project_dir=tmp, project=f"x{m}")
            results[m] = {"params": trainable(mg), "widths": widths, "test_acc": t["test_acc"]}
            print(f"multiplier {m}: widths {widths}, {results[m]['params']} parameters, test accuracy {t['test_acc']:.4f}")
        assert results[1]["params"] == 661
        assert results[2]["widths"] == [32, 32, 5]

        def objective(mg, data_module, config):
            return accuracy(mg, data_module)

        r = mase_rs.search(
            REPO / "configs" / "jsc_three_linear_shared_multiplier_search.toml",
            objective=objective,
            project_dir=tmp,
            n_trials=3,
        )
        study = r["studies"][0]
        print(f"search(..., objective=fn): {study['complete']} trials, best {study['best']}")
        assert study["complete"] == 3
    return results


if __name__ == "__main__":
    main()
