"""mase-rs from Python: MASE's `chop` API over the Rust crates.

Code written for MASE runs with `chop` replaced by `mase_rs` in its imports:

>>> from mase_rs import MaseGraph, get_model, get_dataset_info
>>> from mase_rs.passes.graph import init_metadata_analysis_pass, add_common_metadata_analysis_pass
>>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
>>> mg, _ = init_metadata_analysis_pass(mg, None)
>>> mg, _ = add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": None}, "add_value": False})
"""

from mase_rs import _native
from mase_rs.actions import search, test, train, transform
from mase_rs.dataset import DatasetInfo, MaseDataModule, get_dataset_info
from mase_rs.ir.graph.mase_graph import MaseGraph, MaseMetadata, Node
from mase_rs.models import ZooModel, get_model, get_model_info
from mase_rs.nn.backend import get_backend, set_backend
from mase_rs.passes.graph import PASSES, get_mase_op, get_mase_type, get_node_actual_target
from mase_rs.passes.graph.analysis import *  # noqa: F401,F403
from mase_rs.passes.graph.transforms import *  # noqa: F401,F403
from mase_rs.plugins import register_pass, register_runner, registered_passes, registered_runners, unregister_pass, unregister_runner
from mase_rs.study import Study, Trial
from mase_rs.tools import InputGenerator, load_model, set_logging_verbosity

globals().update(PASSES)

__all__ = [
    "DatasetInfo",
    "InputGenerator",
    "MaseDataModule",
    "MaseGraph",
    "MaseMetadata",
    "Node",
    "ZooModel",
    "get_backend",
    "get_dataset_info",
    "get_mase_op",
    "get_mase_type",
    "get_model",
    "get_model_info",
    "get_node_actual_target",
    "load_model",
    "register_pass",
    "register_runner",
    "registered_passes",
    "registered_runners",
    "search",
    "set_backend",
    "set_logging_verbosity",
    "Study",
    "Trial",
    "unregister_pass",
    "unregister_runner",
    "test",
    "train",
    "transform",
    *PASSES,
]
