"""`train` and `test` as functions, and a checkpoint of `ch train` run from Python: the
accuracy of `mg(x)` on the test split equals the one `ch test` reports."""

import numpy as np
import pytest

import mase_rs


def test_train_then_test_agree_with_python_forward(tmp_path):
    r = mase_rs.train("toy", "toy_tiny", max_epochs=2, batch_size=8, project_dir=tmp_path, project="t")
    assert r["action"] == "train" and r["model"] == "toy"
    t = mase_rs.test("toy", "toy_tiny", load=r["best_checkpoint"], project_dir=tmp_path, project="t")
    mg = mase_rs.load_model(r["best_checkpoint"])
    mg.model.eval()
    dm = mase_rs.MaseDataModule(name="toy_tiny", batch_size=1000)
    batches = list(dm.test_dataloader())
    xs = np.concatenate([np.asarray(x) for x, _ in batches])
    ys = np.concatenate([np.asarray(y) for _, y in batches])
    pred = mg(xs).argmax(1)
    assert t["samples"] == len(ys)
    assert t["test_acc"] == pytest.approx(float((pred == np.asarray(ys)).mean()), abs=1e-12)


def test_failed_action_raises_the_cli_line(tmp_path):
    with pytest.raises(ValueError) as e:
        mase_rs.train("jsc-nope", "toy_tiny", max_epochs=1, project_dir=tmp_path)
    assert "unknown model `jsc-nope`" in e.value.args[0] and "\n" not in e.value.args[0]
    with pytest.raises(FileNotFoundError):
        mase_rs.transform(tmp_path / "missing.toml", "toy", "toy_tiny")
