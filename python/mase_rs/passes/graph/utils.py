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
    """What the node runs, as chop's `get_node_actual_target`: for a `call_module` node, its
    module: for a graph traced from a `torch.nn.Module`, the user's submodule (holding the
    graph's current weights); for other graphs, with torch installed, a new `torch.nn` module
    of the layer holding the graph's weights (`Linear(in_features=16, out_features=5,
    bias=True)`), and without torch the layer as a dict (`{"op": "linear", "in_features": 16,
    "out_features": 5, "bias": True}`). For other nodes, the fx target (the function or method
    name)."""
    if node.op == "call_module":
        return node.graph._actual_target(node)
    return node.target
