"""MASE's analysis passes (`chop.passes.graph.analysis`): every registry pass that is not a
transform or interface pass, as `mg, info = <name>_analysis_pass(mg, pass_args)`."""

from mase_rs.passes.graph._registry import PASSES as _PASSES

_names = [n for n in _PASSES if n.endswith("_analysis_pass")]
globals().update({n: _PASSES[n] for n in _names})
__all__ = _names
