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

Masks become what PyTorch's `multi_head_attention_forward` makes of them: a bool mask (True =
not attended) the addend `where(mask, -inf, 0)`, a float mask itself; the key-padding mask
`[N, S]` viewed `[N, 1, 1, S]`, a 3-D `attn_mask` `[N * H, L, S]` viewed `[N, H, L, S]`, the two
added (`attn_mask + key_padding_mask`) and the sum added to the scaled scores before the
softmax. A mask's dtype (and, for `attn_mask`, its rank) must be known when the module is
traced: a tensor attribute of the module, a forward argument whose dtype
`MaseGraph(input_dtypes={...})` gives (an `attn_mask` argument is taken to be 2-D; a 3-D one
then fails to broadcast unless the batch is 1, where it means the same), or for the
key-padding mask a comparison or its `~` (`ids == pad`).

A call this cannot express — a mask whose dtype is not known then (a forward's argument not
in `input_dtypes`, where `MaseGraph` then refuses the model and names `input_dtypes`), an
`is_causal` without a mask, `need_weights=True` with the weights used, separate key and value
widths, `add_bias_kv`, `add_zero_attn`, and `nn.TransformerEncoder`'s key-padding mask where
the encoder runs on nested tensors (its padded outputs are then zeros) — is left as it is (an
opaque region that PyTorch runs).
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


class _Unsupported(Exception):
    """A call whose masks this rewrite cannot express: it stays PyTorch code."""


def _addend(b, mask):
    """The additive form of an attention mask (`-inf` where a bool mask is True, a float mask
    itself) and the mask's shape where known: a tensor attribute's; `(None, None)` for a forward
    argument, taken to be 2-D (`[L, S]`, or `[N, S]` for a key-padding mask); None for a
    computed mask. Raises `_Unsupported` when the mask's dtype is not known at trace time."""
    from mase_rs.ir.graph.torch_fx import _attribute, _mask_dtype

    dtype = _mask_dtype(mask)
    if dtype is None or not (dtype == torch.bool or dtype.is_floating_point):
        raise _Unsupported
    addend = b.fn(torch.where, mask, float("-inf"), 0.0) if dtype == torch.bool else mask
    if mask.op == "get_attr":
        return addend, tuple(_attribute(b.gm, mask.target).shape)
    return addend, ((None, None) if mask.op == "placeholder" else None)


def _mask_bias(b, m, n, key_padding_mask, attn_mask):
    """What PyTorch adds to the scaled scores `[N, H, L, S]` for these masks (None for none);
    `n` is the node of the batch size."""
    bias = None
    if attn_mask is not None:
        bias, shape = _addend(b, attn_mask)
        if shape is None or len(shape) not in (2, 3):
            raise _Unsupported
        if len(shape) == 3:
            bias = b.method("reshape", bias, -1, m.num_heads, shape[1], shape[2])
    if key_padding_mask is not None:
        kp, shape = _addend(b, key_padding_mask)
        if shape is not None and len(shape) != 2:
            raise _Unsupported
        kp = b.method("reshape", kp, n, 1, 1, -1)
        bias = kp if bias is None else b.fn(torch.add, bias, kp)
    return bias


def _attention(b, path, m, x, key_padding_mask=None, attn_mask=None):
    """The nodes of `m(x, x, x, key_padding_mask, need_weights=False, attn_mask)[0]`
    (self-attention), `m` at `path`."""
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
    bias = _mask_bias(b, m, n, key_padding_mask, attn_mask)
    if bias is not None:
        scores = b.fn(torch.add, scores, bias)
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


def _encoder_layer(b, path, layer, x, masks=(None, None)):
    """The nodes of `layer(x, src_mask, src_key_padding_mask)` (`_layer_supported(layer)`);
    `masks` is `(src_mask, src_key_padding_mask)`."""
    attn_mask, key_padding_mask = masks

    def attention(y):
        a = _attention(b, f"{path}.self_attn", layer.self_attn, y, key_padding_mask, attn_mask)
        return b.module(f"{path}.dropout1", a)

    def feed_forward(y):
        y = _activation(b, path, layer, b.module(f"{path}.linear1", y))
        y = b.module(f"{path}.linear2", b.module(f"{path}.dropout", y))
        return b.module(f"{path}.dropout2", y)

    if layer.norm_first:
        x = b.fn(torch.add, x, attention(b.module(f"{path}.norm1", x)))
        return b.fn(torch.add, x, feed_forward(b.module(f"{path}.norm2", x)))
    x = b.module(f"{path}.norm1", b.fn(torch.add, x, attention(x)))
    return b.module(f"{path}.norm2", b.fn(torch.add, x, feed_forward(x)))


def _layer_masks(node, mask_name):
    """`(src_mask, src_key_padding_mask)` of an encoder (layer) call; raises `_Unsupported` for
    `is_causal` without a mask (with one, PyTorch takes it as a hint that the mask is causal)."""
    mask, padding = _arg(node, 1, mask_name), _arg(node, 2, "src_key_padding_mask")
    if _arg(node, 3, "is_causal") and mask is None:
        raise _Unsupported
    return mask, padding


def _encoder(b, node, m):
    """The nodes of `nn.TransformerEncoder` `m`'s call `node`."""
    masks = _layer_masks(node, "mask")
    # With nested tensors (eval, a key-padding mask), PyTorch's encoder returns zeros at the
    # padded positions, which the layers' ops do not.
    if masks[1] is not None and getattr(m, "use_nested_tensor", False):
        raise _Unsupported
    out = node.args[0]
    for i, layer in enumerate(m.layers):
        out = _encoder_layer(b, f"{node.target}.layers.{i}", layer, out, masks)
    if m.norm is not None:
        out = b.module(f"{node.target}.norm", out)
    return out


def expand(gm):
    """Rewrites the attention modules' calls in `gm` (see the module's doc); returns how many."""
    done = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module":
            continue
        m = gm.get_submodule(node.target)
        out = None
        b = _Builder(gm, node)
        made = len(gm.graph.nodes)
        try:
            if isinstance(m, nn.TransformerEncoderLayer) and _layer_supported(m):
                out = _encoder_layer(b, node.target, m, node.args[0], _layer_masks(node, "src_mask"))
            elif isinstance(m, nn.TransformerEncoder) and all(_layer_supported(layer) for layer in m.layers):
                out = _encoder(b, node, m)
            elif isinstance(m, nn.MultiheadAttention) and _attention_supported(m):
                out = _self_attention_call(b, node, m)
                if out is not None:
                    for user in list(node.users):
                        if user.args[1] == 0:
                            user.replace_all_uses_with(out)
                        gm.graph.erase_node(user)
        except _Unsupported:
            out = None
        if out is None:
            _drop_unused(gm, node, made)
            continue
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        done += 1
    if done:
        gm.recompile()
    return done


def _drop_unused(gm, anchor, made):
    """Erases the nodes a rewrite given up made before `anchor` (the last `len - made` nodes
    before it, each unused once the later ones are gone)."""
    extra = len(gm.graph.nodes) - made
    for _ in range(extra):
        gm.graph.erase_node(anchor.prev)


def _self_attention_call(b, node, m):
    """`m(x, x, x, ...)` whose only use is `[0]`: its nodes, else None."""
    q, k, v = (_arg(node, i, name) for i, name in enumerate(("query", "key", "value")))
    if not (q is k is v):
        return None
    key_padding_mask, attn_mask = _arg(node, 3, "key_padding_mask"), _arg(node, 5, "attn_mask")
    if _arg(node, 7, "is_causal", False) and attn_mask is None:
        return None
    # `y, _ = attn(...)` reads both entries; the weights must be read by nothing.
    users = list(node.users)
    if any(u.op != "call_function" or u.target is not operator.getitem for u in users):
        return None
    if not any(u.args[1] == 0 for u in users) or any(u.args[1] != 0 and u.users for u in users):
        return None
    return _attention(b, node.target, m, q, key_padding_mask, attn_mask)
