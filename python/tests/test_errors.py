"""Bad input raises ValueError, KeyError or FileNotFoundError with one line; a panic becomes a
RuntimeError."""

import numpy as np
import pytest

import mase_rs
from mase_rs import _native


def message(excinfo):
    text = excinfo.value.args[0]
    assert "\n" not in text
    return text


CASES = [
    # (what, call, exception, words the message must contain)
    ("unknown model", lambda mg: mase_rs.get_model("jsc-nope", "cls", mase_rs.get_dataset_info("jsc")), KeyError, "unknown model `jsc-nope`"),
    ("unknown data set", lambda mg: mase_rs.get_dataset_info("nope"), KeyError, "unknown data set `nope`"),
    ("missing model file", lambda mg: mase_rs.MaseGraph(model="no/such/model.onnx"), FileNotFoundError, "no/such/model.onnx"),
    ("missing checkpoint", lambda mg: mase_rs.load_model("no/such/best.ckpt"), FileNotFoundError, "no/such/best.ckpt"),
    ("unknown pass key", lambda mg: mase_rs.quantize_transform_pass(mg, {"by": "type", "bogus": 1}), ValueError, "bogus"),
    ("unknown argument", lambda mg: mase_rs.report_graph_analysis_pass(mg, {"nonsense": 1}), KeyError, "nonsense"),
    ("bad width", lambda mg: mase_rs.quantize_transform_pass(mg, {"by": "type", "linear": {"config": {"name": "integer", "weight_width": "wide"}}}), ValueError, "quantize"),
    ("bad input shape", lambda mg: mg(np.zeros((2, 7), np.float32)), ValueError, "7"),
    ("unknown node", lambda mg: mg._native.node_meta_json("nope", "common"), KeyError, "nope"),
    ("unknown metadata part", lambda mg: mg.nodes[0].meta["mase"].__setitem__("firmware", {}), KeyError, "no metadata part `firmware`"),
    ("metadata of the wrong shape", lambda mg: mg.nodes[2].meta["mase"].parameters["common"].__setitem__("args", 5), ValueError, "node `seq_blocks_1`: metadata `common`"),
    ("state dict shape", lambda mg: mg.load_state_dict({"seq_blocks.2.weight": np.zeros((2, 2), np.float32)}, strict=False), ValueError, "seq_blocks.2.weight"),
    ("state dict name", lambda mg: mg.load_state_dict({"nope.weight": np.zeros(2, np.float32)}, strict=False), KeyError, "nope.weight"),
    ("state dict missing", lambda mg: mg.load_state_dict({}), KeyError, "missing parameters"),
    ("bad batch size", lambda mg: mase_rs.MaseDataModule(name="jsc", batch_size=0), ValueError, "batch_size"),
    ("bad logging level", lambda mg: mase_rs.set_logging_verbosity("loud"), ValueError, "loud"),
]


@pytest.mark.parametrize("what,call,exc,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_one_line(jsc_tiny, what, call, exc, words):
    with pytest.raises(exc) as e:
        call(jsc_tiny)
    assert words in message(e)


def test_a_panic_becomes_runtime_error():
    with pytest.raises(RuntimeError) as e:
        _native._failpoint_panic()
    assert message(e) == "internal error in failpoint: failpoint panic; please report"
