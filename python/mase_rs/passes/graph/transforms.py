"""MASE's transform passes (`chop.passes.graph.transforms`): `quantize_transform_pass`,
`channel_multiplier_transform_pass` (lab 4's `redefine_linear_transform_pass`),
`fold_batch_norm_transform_pass` (mase-rs's, for integer hardware), and the
interface passes that save and load node metadata."""

from mase_rs.passes.graph._registry import PASSES as _PASSES

_names = [n for n in _PASSES if n.endswith("_transform_pass") or n.endswith("_interface_pass")]
globals().update({n: _PASSES[n] for n in _names})
__all__ = _names
