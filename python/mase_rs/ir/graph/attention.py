"""`nn.MultiheadAttention`, `nn.TransformerEncoderLayer` and `nn.TransformerEncoder` as the ops
they are made of (needs torch).

torch.fx keeps these `torch.nn` modules as leaves, and their forwards cannot be traced (they
branch on their arguments). `expand` rewrites each call in a traced `GraphModule` into the fx
nodes of what the module computes, in PyTorch's order of operations, so that the graph holds
the projections as layers quantize can reach (`by = "type"`: `linear` for the feed-forward
layers and the attention's output projection, `matmul` for the packed input projection and the
attention products; `by = "name"` for any of them):

    qkv = x @ in_proj_weight.T + in_proj_bias          # one product for q, k and v
    q, k, v = qkv.chunk(3, -1), each viewed [N, H, L, d]
    a = dropout(softmax(q @ k.T * d ** -0.5, -1))      # the module's own dropout probability
    out = out_proj(a @ v, viewed [N, L, E])

The parameters stay where the module has them (`self_attn.in_proj_weight`, `linear1.weight`),
so the state dict keeps PyTorch's names. The attention's dropout runs as an `nn.Dropout` module
registered on the traced module (`_mase_<attention path>_dropout`), so that it follows train and
eval mode.

A call this cannot express — masks, `need_weights=True` with the weights used, separate key and
value widths, `add_bias_kv`, `add_zero_attn` — is left as it is (an opaque region that PyTorch
runs).
"""

import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F


def _arg(node, index, name, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _attention_supported(m):
    return m._qkv_same_embed_dim and m.bias_k is None and m.bias_v is None and not m.add_zero_attn


class _Builder:
    """Makes fx nodes before `anchor` in `gm`'s graph."""

    def __init__(self, gm, anchor):
        self.gm, self.graph, self.anchor = gm, gm.graph, anchor

    def fn(self, target, *args, **kwargs):
        with self.graph.inserting_before(self.anchor):
            return self.graph.call_function(target, args, kwargs)

    def method(self, name, *args):
        with self.graph.inserting_before(self.anchor):
            return self.graph.call_method(name, args)

    def module(self, path, *args):
        with self.graph.inserting_before(self.anchor):
            return self.graph.call_module(path, args)

    def attr(self, path):
        with self.graph.inserting_before(self.anchor):
            return self.graph.get_attr(path)

    def dropout(self, p, x, path):
        """`x` through a new `nn.Dropout(p)` on the traced module, named after the attention
        module at `path` (none when p is 0)."""
        if p == 0:
            return x
        name = "_mase_" + path.replace(".", "_") + "_dropout"
        while hasattr(self.gm, name):
            name += "_"
        self.gm.add_module(name, nn.Dropout(p))
        return self.module(name, x)


def _attention(b, path, m, x):
    """The nodes of `m(x, x, x, need_weights=False)[0]` (self-attention), `m` at `path`."""
    e, h = m.embed_dim, m.num_heads
    if not m.batch_first:
        x = b.method("transpose", x, 0, 1)
    w = b.method("transpose", b.attr(f"{path}.in_proj_weight"), 0, 1)
    qkv = b.fn(torch.matmul, x, w)
    if m.in_proj_bias is not None:
        qkv = b.fn(torch.add, qkv, b.attr(f"{path}.in_proj_bias"))
    n = b.method("size", x, 0)
    heads = []
    for part in range(3):
        piece = b.fn(operator.getitem, b.fn(torch.chunk, qkv, 3, -1), part)
        heads.append(b.method("transpose", b.method("reshape", piece, n, -1, h, e // h), 1, 2))
    q, k, v = heads
    scores = b.fn(torch.matmul, q, b.method("transpose", k, -2, -1))
    scores = b.fn(torch.mul, scores, float(e // h) ** -0.5)
    weights = b.dropout(m.dropout, b.fn(F.softmax, scores, -1), path)
    out = b.method("reshape", b.method("transpose", b.fn(torch.matmul, weights, v), 1, 2), n, -1, e)
    out = b.module(f"{path}.out_proj", out)
    if not m.batch_first:
        out = b.method("transpose", out, 0, 1)
    return out


def _activation(b, path, layer, x):
    act = layer.activation
    if isinstance(act, nn.Module):
        return b.module(f"{path}.activation", x)
    if act is F.relu:
        return b.fn(F.relu, x)
    if act is F.gelu:
        return b.fn(F.gelu, x)
    return None


def _layer_supported(layer):
    act = layer.activation
    return _attention_supported(layer.self_attn) and (isinstance(act, nn.Module) or act in (F.relu, F.gelu))


def _encoder_layer(b, path, layer, x):
    """The nodes of `layer(x)` without masks (`_layer_supported(layer)`)."""
    def attention(y):
        return b.module(f"{path}.dropout1", _attention(b, f"{path}.self_attn", layer.self_attn, y))

    def feed_forward(y):
        y = _activation(b, path, layer, b.module(f"{path}.linear1", y))
        y = b.module(f"{path}.linear2", b.module(f"{path}.dropout", y))
        return b.module(f"{path}.dropout2", y)

    if layer.norm_first:
        x = b.fn(torch.add, x, attention(b.module(f"{path}.norm1", x)))
        return b.fn(torch.add, x, feed_forward(b.module(f"{path}.norm2", x)))
    x = b.module(f"{path}.norm1", b.fn(torch.add, x, attention(x)))
    return b.module(f"{path}.norm2", b.fn(torch.add, x, feed_forward(x)))


def _no_masks(node, first):
    """Whether a call passes no masks (arguments from `first` on are None or absent)."""
    rest = list(node.args[first:]) + [v for k, v in node.kwargs.items() if k in ("mask", "src_mask", "src_key_padding_mask", "key_padding_mask", "attn_mask")]
    return all(v is None or v is False for v in rest)


def expand(gm):
    """Rewrites the attention modules' calls in `gm` (see the module's doc); returns how many."""
    done = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module":
            continue
        m = gm.get_submodule(node.target)
        out = None
        b = _Builder(gm, node)
        if isinstance(m, nn.TransformerEncoderLayer) and _no_masks(node, 1) and _layer_supported(m):
            out = _encoder_layer(b, node.target, m, node.args[0])
        elif isinstance(m, nn.TransformerEncoder) and _no_masks(node, 1) and all(_layer_supported(layer) for layer in m.layers):
            out = node.args[0]
            for i, layer in enumerate(m.layers):
                out = _encoder_layer(b, f"{node.target}.layers.{i}", layer, out)
            if m.norm is not None:
                out = b.module(f"{node.target}.norm", out)
        elif isinstance(m, nn.MultiheadAttention) and _attention_supported(m):
            out = _self_attention_call(b, node, m)
            if out is not None:
                for user in list(node.users):
                    if user.args[1] == 0:
                        user.replace_all_uses_with(out)
                    gm.graph.erase_node(user)
        if out is None:
            continue
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        done += 1
    if done:
        gm.recompile()
    return done


def _self_attention_call(b, node, m):
    """`m(x, x, x, ...)` whose only use is `[0]`, without masks: its nodes, else None."""
    q, k, v = (_arg(node, i, name) for i, name in enumerate(("query", "key", "value")))
    if not (q is k is v) or _arg(node, 3, "key_padding_mask") is not None or _arg(node, 5, "attn_mask") is not None:
        return None
    if _arg(node, 7, "is_causal", False):
        return None
    # `y, _ = attn(...)` reads both entries; the weights must be read by nothing.
    users = list(node.users)
    if any(u.op != "call_function" or u.target is not operator.getitem for u in users):
        return None
    if not any(u.args[1] == 0 for u in users) or any(u.args[1] != 0 and u.users for u in users):
        return None
    return _attention(b, node.target, m, q)
