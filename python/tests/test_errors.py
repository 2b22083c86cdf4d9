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


# Arguments of the wrong kind or out of range, refused at the Python boundary with the exact line
# (the same checks as `ch`'s flags), never accepted silently or answered with Python internals.
XY = (np.zeros((8, 16), np.float32), np.zeros(8, np.int64))
SEEDED = {"name": "graph/quantize/mixed_precision_ptq", "setup": {"by": "name"},
          "seed": {"default": {"config": {"name": ["NA"]}}, "seq_blocks_9": {"config": {"name": ["integer"]}}}}
BY_TYPE = {"name": "graph/quantize/mixed_precision_ptq", "setup": {"by": "type"}, "seed": {"default": {"config": {"name": ["NA"]}}}}
EXPECTED = "expected a dict of the pass's arguments (or None)"
ARGUMENT_CASES = [
    # (what, call, exception, the whole message)
    ("fit lr nan", lambda mg: mg.fit(XY, lr=float("nan")), ValueError, "fit: lr=nan: expected a finite number > 0"),
    ("fit lr inf", lambda mg: mg.fit(XY, lr=float("inf")), ValueError, "fit: lr=inf: expected a finite number > 0"),
    ("fit lr negative", lambda mg: mg.fit(XY, lr=-0.1), ValueError, "fit: lr=-0.1: expected a finite number > 0"),
    ("fit lr string", lambda mg: mg.fit(XY, lr="fast"), TypeError, "fit: lr: expected a finite number > 0, got str 'fast'"),
    ("fit weight_decay nan", lambda mg: mg.fit(XY, weight_decay=float("nan")), ValueError, "fit: weight_decay=nan: expected a finite number >= 0"),
    ("fit epochs negative", lambda mg: mg.fit(XY, epochs=-1), ValueError, "fit: epochs=-1: expected an integer >= 1"),
    ("fit epochs float", lambda mg: mg.fit(XY, epochs=2.5), TypeError, "fit: epochs: expected an integer >= 1, got float 2.5"),
    ("fit batch_size 0", lambda mg: mg.fit(XY, batch_size=0), ValueError, "fit: batch_size=0: expected an integer >= 1"),
    ("conv_algo unknown", lambda mg: setattr(mg, "conv_algo", "fastest"), ValueError, "conv_algo: expected one of 'fast', 'exact', 'winograd', got 'fastest'"),
    ("conv_algo a number", lambda mg: setattr(mg, "conv_algo", 3), TypeError, "conv_algo: expected one of 'fast', 'exact', 'winograd', got int 3"),
    ("conv_algo keyword", lambda mg: mase_rs.MaseGraph(mg, conv_algo="direct"), ValueError, "conv_algo: expected one of 'fast', 'exact', 'winograd', got 'direct'"),
    ("complex input", lambda mg: mg(np.zeros((2, 16), np.complex64)), TypeError, "input: expected real numbers, got complex values (complex64)"),
    ("complex list", lambda mg: mg([[1j] * 16]), TypeError, "input: expected real numbers, got complex values (complex128)"),
    ("pass args a string", lambda mg: mase_rs.quantize_transform_pass(mg, "type"), TypeError, f"quantize_transform_pass: pass_args: {EXPECTED}, got str 'type'"),
    ("graph a dict", lambda mg: mase_rs.quantize_transform_pass({"by": "type"}, {}), TypeError, "quantize_transform_pass: graph: expected a MaseGraph, got dict"),
    ("dummy_in a number", lambda mg: mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": 5}), TypeError,
     'add_common_metadata_analysis_pass: dummy_in: expected a dict of input arrays ({"x": batch}) or an array, got int 5'),
    ("dummy_in of numbers", lambda mg: mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": 5}}), TypeError,
     "add_common_metadata_analysis_pass: dummy_in: expected a dict of input arrays ({\"x\": batch}) or an array, got dict {'x': 5}"),
    ("get_model dataset_info", lambda mg: mase_rs.get_model("jsc-tiny", "cls", 5), TypeError,
     "get_model: dataset_info: expected a DatasetInfo (from get_dataset_info), got int 5"),
    ("seed names no node", lambda mg: mase_rs.Study(SEEDED, mg), ValueError,
     'search config: `search.search_space.seed.seq_blocks_9`: the model has no node `seq_blocks_9` (with setup.by = "name", a seed key is a node name, `default` or an op type)'),
    ("resume without a study", lambda mg: mase_rs.Study(BY_TYPE, mg, mode="resume", name="lab3"), ValueError,
     'study storage memory: holds no study `lab3` to resume (start it without --resume, or with mode "fresh")'),
    ("storage in a missing folder", lambda mg: mase_rs.Study(BY_TYPE, mg, storage="sqlite:///no/such/folder/s.db"), ValueError,
     "study storage sqlite:///no/such/folder/s.db: the folder no/such/folder does not exist; create it first (a storage URL never creates folders)"),
]


@pytest.mark.parametrize("what,call,exc,line", ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_bad_arguments_raise_one_line_naming_them(jsc_tiny, what, call, exc, line):
    with pytest.raises(exc) as e:
        call(jsc_tiny)
    assert message(e) == line
