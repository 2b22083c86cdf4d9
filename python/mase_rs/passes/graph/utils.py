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
    module in `mg.model` (for a graph traced from a `torch.nn.Module`, the user's submodule),
    holding the graph's current weights (`Linear(in_features=16, out_features=5, bias=True)`);
    without torch, the layer as a dict (`{"op": "linear", "in_features": 16, "out_features": 5,
    "bias": True}`). For other nodes, the fx target (the function or method name)."""
    if node.op == "call_module":
        return node.graph._actual_target(node)
    return node.target


def get_parent_name(target):
    """The parent's path and the attribute name of a dotted module path, as MASE's
    `get_parent_name`: `"seq_blocks.2"` gives `("seq_blocks", "2")`, `"fc"` gives `("", "fc")`.

    >>> get_parent_name("seq_blocks.2"), get_parent_name("fc")
    (('seq_blocks', '2'), ('', 'fc'))
    """
    if not isinstance(target, str):
        raise TypeError(f"get_parent_name: expected a module path (str), got {type(target).__name__}")
    *parent, name = target.rsplit(".", 1)
    return (parent[0] if parent else ""), name


def get_module_by_name(model, request):
    """The submodule of `model` named `request` in `model.named_modules()`, or None, as MASE's
    `get_module_by_name`."""
    for name, layer in model.named_modules():
        if name == request:
            return layer
    return None
