"""MASE's node helpers (`chop.passes.graph.utils`)."""


def get_mase_op(node):
    """The node's `mase_op` (`linear`, `relu`, `batch_norm1d`, ...), set by
    `add_common_metadata_analysis_pass`."""
    return node.meta["mase"].parameters["common"]["mase_op"]


def get_mase_type(node):
    """The node's `mase_type` (`module_related_func`, `placeholder`, ...), set by
    `add_common_metadata_analysis_pass`."""
    return node.meta["mase"].parameters["common"]["mase_type"]


def get_node_actual_target(node):
    """What the node runs: for a `call_module` node, its layer as a dict (`{"op": "linear",
    "in_features": 16, "out_features": 5, "bias": True}`: mase-rs's op, where MASE returns the
    `nn.Module`); for other nodes, the fx target (the function or method name)."""
    if node.op == "call_module":
        return node.module
    return node.target
