"""MaseGraph from files: a model TOML, an ONNX file written by `ch export`, a checkpoint."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

import mase_rs
from conftest import ch_command  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_model_toml_needs_and_takes_dataset_info(jsc_info, jsc_batch):
    path = REPO / "models/jsc-m.toml"
    with pytest.raises(ValueError) as e:
        mase_rs.MaseGraph(model=str(path))
    assert "needs the data set's sample_shape" in e.value.args[0]
    mg = mase_rs.MaseGraph(model=path, dataset_info=jsc_info)
    # The file's comment counts 1455 trainable parameters on jsc (BN buffers excluded).
    sd = mg.state_dict()
    trainable = sum(v.size for k, v in sd.items() if not k.endswith(("running_mean", "running_var", "num_batches_tracked")))
    assert trainable == 1455
    mg.model.eval()
    assert mg(jsc_batch).shape == (64, 5)


def test_onnx_export_imports_with_the_same_outputs(jsc_tiny, jsc_batch, tmp_path):
    ckpt, onnx = tmp_path / "m.ckpt", tmp_path / "m.onnx"
    jsc_tiny.save(ckpt)
    r = subprocess.run([*ch_command(), "export", "--load", str(ckpt), "-o", str(onnx)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    imported = mase_rs.MaseGraph(model=onnx)
    imported.model.eval()
    np.testing.assert_allclose(imported(jsc_batch), jsc_tiny(jsc_batch), rtol=1e-5, atol=1e-6)


def test_get_model_with_checkpoint_carries_its_weights(jsc_info, jsc_tiny, tmp_path):
    sd = jsc_tiny.state_dict()
    sd["seq_blocks.2.bias"] = np.array([1, 2, 3, 4, 5], np.float32)
    jsc_tiny.load_state_dict(sd)
    jsc_tiny.save(tmp_path / "best.ckpt")
    model = mase_rs.get_model("jsc-tiny", "cls", jsc_info, checkpoint=tmp_path / "best.ckpt")
    mg = mase_rs.MaseGraph(model=model)
    np.testing.assert_array_equal(mg.state_dict()["seq_blocks.2.bias"], [1, 2, 3, 4, 5])
    fresh = mase_rs.MaseGraph(model=mase_rs.get_model("jsc-tiny", "cls", jsc_info, seed=3))
    assert not np.array_equal(fresh.state_dict()["seq_blocks.2.bias"], [1, 2, 3, 4, 5])


def test_zoo_weights_are_those_ch_draws_for_the_seed(jsc_info, tmp_path):
    onnx = tmp_path / "init.onnx"
    r = subprocess.run([*ch_command(), "export", "jsc-tiny", "jsc", "--seed", "3", "-o", str(onnx)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    drawn = mase_rs.MaseGraph(model=onnx).state_dict()
    ours = mase_rs.get_model("jsc-tiny", "cls", jsc_info, seed=3).state_dict()
    for name in ("seq_blocks.0.weight", "seq_blocks.2.weight", "seq_blocks.2.bias"):
        np.testing.assert_array_equal(ours[name], drawn[name])
