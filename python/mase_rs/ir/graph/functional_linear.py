"""`F.linear(x, weight, bias)` as the ops it is made of (needs torch).

A graph's `linear` op owns its weight and bias (`nn.Linear`'s, saved under the layer's name).
A functional call takes them as tensors: a module's own parameters (`self.w`) or computed ones
(a tied or generated weight). `expand` rewrites each such call in a traced `GraphModule` as

    y = x @ weight.transpose(0, 1) + bias        # x @ weight for a vector weight

so that the parameters keep their names and their gradients, and quantize reaches the product
by type `matmul` (or by name).
"""

import torch
import torch.nn.functional as F

from mase_rs.ir.graph.attention import _arg
from mase_rs.ir.graph.torch_fx import _attribute


def _rank(gm, node):
    """The rank of a `get_attr` tensor, else None (a computed tensor's rank is not known)."""
    if isinstance(node, torch.fx.Node) and node.op == "get_attr":
        value = _attribute(gm, node.target)
        if isinstance(value, torch.Tensor):
            return value.dim()
    return None


def expand(gm):
    """Rewrites the `F.linear` calls of `gm` (see the module's doc); returns how many."""
    done = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not F.linear:
            continue
        x, w, b = _arg(node, 0, "input"), _arg(node, 1, "weight"), _arg(node, 2, "bias", None)
        with gm.graph.inserting_before(node):
            wt = w if _rank(gm, w) == 1 else gm.graph.call_method("transpose", (w, 0, 1))
            y = gm.graph.call_function(torch.matmul, (x, wt))
            if b is not None:
                y = gm.graph.call_function(torch.add, (y, b))
        node.replace_all_uses_with(y)
        gm.graph.erase_node(node)
        done += 1
    if done:
        gm.recompile()
    return done
