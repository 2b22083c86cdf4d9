"""MASE lab 1 with mase_rs: train jsc-tiny, vary the training settings, and add a network of
your own.

Code tasks reproduced:
- train jsc-tiny with two learning rates and compare their test accuracy (`train`, `test`);
- "add your own network": a model file four times jsc-tiny's width (mase-rs models are TOML
  files instead of Python classes), trained the same way;
- read the trained checkpoint back as a `MaseGraph` and check in Python that its accuracy on the
  test split is the one `test` reported.

Run: `python python/examples/lab1.py` (after `pip install .`). Epochs are few here so that the
tests that run the examples stay quick; raise `EPOCHS` for real runs.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import use_jsc_data  # noqa: E402

import mase_rs  # noqa: E402

EPOCHS = 2

# The layers of the model file, as (op, out_features of a linear layer).
MY_LAYERS = [("batch_norm1d", None), ("relu", None), ("linear", 32), ("batch_norm1d", None), ("relu", None), ("linear", 5), ("relu", None)]
MY_MODEL = 'name = "jsc-my"\ndescription = "BN, ReLU, Linear(16 -> 32), BN, ReLU, Linear(32 -> 5), ReLU"\n' + "".join(
    f'\n[[layers]]\nop = "{op}"\n' + (f"out_features = {n}\n" if n else "") for op, n in MY_LAYERS
)


def accuracy_in_python(checkpoint):
    """The test accuracy of a checkpoint, computed with `MaseGraph` and numpy."""
    mg = mase_rs.load_model(checkpoint)
    mg.model.eval()
    dm = mase_rs.MaseDataModule(name="jsc", batch_size=1024)
    correct = total = 0
    for x, y in dm.test_dataloader():
        correct += int((np.asarray(mg(x)).argmax(1) == np.asarray(y)).sum())
        total += len(y)
    return correct / total


def main():
    use_jsc_data()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lr in (1e-3, 1e-2):
            r = mase_rs.train("jsc-tiny", "jsc", max_epochs=EPOCHS, batch_size=64, learning_rate=lr, project_dir=tmp, project=f"tiny-lr{lr}")
            t = mase_rs.test("jsc-tiny", "jsc", load=r["best_checkpoint"], project_dir=tmp, project=f"tiny-lr{lr}")
            results[f"jsc-tiny lr={lr}"] = t["test_acc"]
        model_file = Path(tmp) / "jsc-my.toml"
        model_file.write_text(MY_MODEL)
        r = mase_rs.train(model_file, "jsc", max_epochs=EPOCHS, batch_size=64, learning_rate=1e-3, project_dir=tmp, project="my")
        t = mase_rs.test(model_file, "jsc", load=r["best_checkpoint"], project_dir=tmp, project="my")
        results["jsc-my"] = t["test_acc"]
        mine = mase_rs.MaseGraph(model=model_file, dataset_info=mase_rs.get_dataset_info("jsc"))
        params = sum(v.size for k, v in mine.state_dict().items() if not k.endswith(("running_mean", "running_var")))
        tiny = mase_rs.MaseGraph(model=mase_rs.get_model("jsc-tiny", "cls"))
        tiny_params = sum(v.size for k, v in tiny.state_dict().items() if not k.endswith(("running_mean", "running_var")))
        print(f"jsc-my has {params} trainable parameters, jsc-tiny {tiny_params}")
        assert params > 4 * tiny_params
        in_python = accuracy_in_python(r["best_checkpoint"])
        print(f"jsc-my test accuracy: ch test {t['test_acc']:.4f}, MaseGraph in Python {in_python:.4f}")
        assert abs(in_python - t["test_acc"]) < 1e-9
    for k, v in results.items():
        print(f"{k:22} test accuracy {v:.4f}")
    return results


if __name__ == "__main__":
    main()
