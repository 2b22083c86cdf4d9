"""Graph passes under MASE's names (`chop.passes.graph`)."""

from mase_rs.passes.graph import analysis, transforms, utils
from mase_rs.passes.graph._registry import PASSES, mase_name
from mase_rs.passes.graph.analysis import *  # noqa: F401,F403
from mase_rs.passes.graph.transforms import *  # noqa: F401,F403
from mase_rs.passes.graph.utils import get_mase_op, get_mase_type, get_node_actual_target

__all__ = list(PASSES) + ["get_mase_op", "get_mase_type", "get_node_actual_target", "PASSES", "mase_name"]
