"""The PyTorch view of a `MaseGraph`: `mg.model` as a `torch.fx.GraphModule` (needs torch).

One truth, two views. The Rust graph is what passes, kernels, export and hardware read; the view
is a `GraphModule` whose fx nodes carry the graph's node names and targets and whose submodules
are real `torch.nn` modules: the user's own objects for a traced module, modules built from the
graph otherwise (`nn.Linear`, `nn.Conv2d`, ..., and `LinearInteger`-style classes for quantized
nodes). The two stay one model:

- view to graph: before mase-rs reads the graph (a forward on the Rust executor, a pass, an
  export), a changed module tree (a module swapped with `setattr`, a resized parameter, an edited
  fx graph) is lowered again into the graph, and parameters the view changed (an optimizer step)
  are copied in;
- graph to view: after mase-rs changes the graph (a pass such as quantize or
  `channel_multiplier`, `fit`, `load_state_dict`), the view gets the new modules and weights, in
  place where shapes allow (so optimizers keep their parameters).

On CPU float32 tensors with the `rust` backend (`mase_rs.set_backend`), the forward and backward
run on mase-rs's executor as one autograd node (`_RustFunction`); on any other device, or with the
`torch` backend, the view's own PyTorch code runs.
"""

import json
import keyword

import numpy as np
import torch
import torch.fx
import torch.nn as nn

from mase_rs.ir.graph import regions, torch_fx
from mase_rs.nn import backend
from mase_rs.nn.functional import implementation
from mase_rs.nn.quantized.functional import quantized_function
from mase_rs.nn.quantized.modules import float_class, format_of, quantized_module


class MaseModule(torch.fx.GraphModule):
    """`mg.model`: a `torch.fx.GraphModule` over the graph. Its `forward` runs on mase-rs's
    executor for CPU float32 tensors (backend `rust`) and as PyTorch code otherwise; a numpy
    array in gives a numpy array out, as `mg(x)` does."""

    def recompile(self):
        code = super().recompile()
        cls = type(self)
        # fx installs the generated forward on the per-instance class; keep it as the PyTorch
        # implementation and put the dispatching forward in its place.
        cls._torch_forward = cls.forward
        cls.forward = _forward
        return code

    def delete_all_unused_submodules(self):
        # What opaque regions call and read is used, though no node of this graph targets it.
        keep = {p: (self.get_submodule(p), True) for p in regions.region_modules(self)}
        for p, persistent in regions.region_tensors(self).items():
            keep[p] = (self.get_parameter(p) if _is_parameter(self, p) else self.get_buffer(p), persistent)
        super().delete_all_unused_submodules()
        for path, (value, persistent) in keep.items():
            regions.install(self, path, value, persistent)

    def __deepcopy__(self, memo):
        copy = super().__deepcopy__(memo)
        regions.set_roots(copy)
        return copy

    def __reduce__(self):
        link = self.__dict__.pop("_mase_link", None)
        try:
            return super().__reduce__()
        finally:
            if link is not None:
                self.__dict__["_mase_link"] = link


def _is_parameter(root, path):
    owner_path, _, name = path.rpartition(".")
    return name in (root.get_submodule(owner_path) if owner_path else root)._parameters


def _forward(self, *args, **kwargs):
    link = self.__dict__.get("_mase_link")
    if link is not None and len(args) == 1 and not kwargs and link.mg._native.io_counts == (1, 1):
        x = args[0]
        if isinstance(x, np.ndarray):
            return link.mg.forward(x)
        if link.runs_in_rust(x):
            return link.rust_forward(self, x)
    elif link is not None and args and not kwargs:
        # Several inputs or outputs: one autograd node over every input and output.
        if all(isinstance(x, np.ndarray) for x in args):
            return link.mg.forward(*args)
        if all(isinstance(x, torch.Tensor) and link.runs_in_rust(x) for x in args):
            return link.rust_forward_many(self, args)
    if link is not None and self.training:
        # PyTorch's batch norm updates its running statistics without bumping their version.
        link.buffers_dirty = True
    return self._torch_forward(*args, **kwargs)


class _RustFunction(torch.autograd.Function):
    """The whole graph as one autograd node: forward and backward on mase-rs's executor, with
    fake quantization and straight-through estimators as `ch train` has them."""

    @staticmethod
    def forward(ctx, link, train, x, *params):
        raw = link.mg._raw
        want_x = bool(train and ctx.needs_input_grad[2])
        buffers = link.buffer_arrays() if train else None
        out = raw.forward(x.detach().contiguous().numpy(), train=train, input_grad=want_x, buffers=buffers)
        link.tape += 1
        ctx.link, ctx.tape, ctx.train, ctx.names = link, link.tape, train, link.trainable
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, grad):
        link = ctx.link
        if link.tape != ctx.tape:
            raise RuntimeError(
                "mase-rs: the Rust executor keeps the activations of its last forward only; call "
                "backward before the next forward of mg.model, or mase_rs.set_backend('torch')"
            )
        gx, grads = link.mg._raw.backward(grad.detach().to(torch.float32).contiguous().numpy())
        by_name = dict(grads)
        out = [None, None, torch.from_numpy(gx) if gx is not None and ctx.needs_input_grad[2] else None]
        for name, need in zip(ctx.names, ctx.needs_input_grad[3:]):
            g = by_name.get(name)
            out.append(torch.from_numpy(g) if need and g is not None else None)
        return tuple(out)


class _RustManyFunction(torch.autograd.Function):
    """`_RustFunction` for a graph with several inputs or outputs: the inputs after
    `inputs` (their number), then the parameters; one output per graph output."""

    @staticmethod
    def forward(ctx, link, train, inputs, *args):
        xs, params = args[:inputs], args[inputs:]
        raw = link.mg._raw
        want_x = bool(train and any(ctx.needs_input_grad[3 : 3 + inputs]))
        buffers = link.buffer_arrays() if train else None
        outs = raw.forward_many([x.detach().contiguous().numpy() for x in xs], train=train, input_grad=want_x, buffers=buffers)
        link.tape += 1
        ctx.link, ctx.tape, ctx.train, ctx.names = link, link.tape, train, link.trainable
        ctx.shapes = [x.shape for x in xs]
        return tuple(torch.from_numpy(o) for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        link = ctx.link
        if link.tape != ctx.tape:
            raise RuntimeError(
                "mase-rs: the Rust executor keeps the activations of its last forward only; call "
                "backward before the next forward of mg.model, or mase_rs.set_backend('torch')"
            )
        gxs, grads = link.mg._raw.backward_many([g.detach().to(torch.float32).contiguous().numpy() for g in grads])
        inputs = len(ctx.shapes)
        out = [None, None, None]
        for gx, shape, need in zip(gxs, ctx.shapes, ctx.needs_input_grad[3 : 3 + inputs]):
            # An input nothing differentiable reads gets no gradient, as in PyTorch.
            out.append(torch.from_numpy(gx).reshape(shape) if need and gx is not None else None)
        by_name = dict(grads)
        for name, need in zip(ctx.names, ctx.needs_input_grad[3 + inputs :]):
            g = by_name.get(name)
            out.append(torch.from_numpy(g) if need and g is not None else None)
        return tuple(out)


def _is_active(quant):
    return bool(quant) and not quant.get("bypass") and format_of(quant) is not None


def _module_op(m):
    """The IR op (as JSON) of a float or quantized module, or None when it has none."""
    make = torch_fx._module_table(nn).get(float_class(type(m)))
    if make is None:
        return None
    try:
        return make(m)
    except torch_fx._NoOp:
        return None


class Link:
    """What ties a `MaseGraph` to its view: the module, where each of the graph's tensors lives
    in it, and what was last copied between the two."""

    def __init__(self, mg):
        self.mg = mg
        self.module = None
        self.tape = 0
        self.signature = None
        # Set by a train-mode forward in PyTorch, whose in-place updates of batch norm's running
        # statistics leave no trace in a tensor's version: the next `to_rust` copies every buffer.
        self.buffers_dirty = False

    def __deepcopy__(self, memo):
        # A deep copy of `mg.model` is a detached PyTorch module.
        return None

    # Building the view from the graph.

    def build(self, reuse, training):
        """Builds the view; `reuse` maps targets to modules to keep when they lower to the
        graph's op (the user's own modules)."""
        fx, root, reused = self._fx_graph(reuse)
        module = MaseModule(root, fx, class_name="GraphModule")
        # What opaque regions call stays where it was in the module tree.
        wanted = {p: True for p in regions.region_modules(module)} | regions.region_tensors(module)
        for path, persistent in sorted(wanted.items()):
            if path in reuse:
                regions.install(module, path, reuse[path], persistent)
        regions.set_roots(module)
        module.__dict__["_mase_link"] = self
        self.module = module
        if reused:
            # The user's modules hold their own values; the graph's may have moved since.
            self._pull_weights()
        module.train(training)
        self._track()
        return module

    def _graph_records(self):
        return json.loads(self.mg._raw.view_records())

    def _fx_graph(self, reuse):
        """The fx graph of the current Rust graph, the modules and tensors its nodes target, and
        whether a module of `reuse` was kept."""
        records = self._graph_records()
        state = self.mg._raw.state_dict()
        trainable = set(self.mg._raw.trainable_names())
        fx = torch.fx.Graph()
        env, root, reused = {}, {}, False
        for i, n in enumerate(records):
            kind, name, target, op, quant = n["kind"], n["name"], n["target"], n["op"], n.get("quant")
            ins = [env[j] for j in n["inputs"]]
            if kind == "placeholder":
                # The forward's argument: ONNX inputs may be named `0` or `input.1`.
                arg = target if target.isidentifier() and not keyword.iskeyword(target) else f"input_{i}"
                node = fx.create_node("placeholder", arg, name=name)
            elif kind == "output":
                # Several outputs are the tuple the forward returns.
                node = fx.output(ins[0] if len(ins) == 1 else tuple(ins))
            elif kind == "get_attr":
                t = torch.from_numpy(np.array(state[target]))
                root[target] = nn.Parameter(t) if target in trainable else t
                node = fx.create_node("get_attr", target, name=name)
            elif kind == "call_module":
                root[target] = self._module(target, op, quant, state, reuse)
                reused = reused or root[target] is reuse.get(target)
                node = fx.create_node("call_module", target, tuple(ins), name=name)
            elif op["op"] == "dropout":
                # Dropout follows the module's train/eval mode, which only a module sees.
                target = f"_mase_{name}"
                root[target] = nn.Dropout(op["p"])
                node = fx.create_node("call_module", target, tuple(ins), name=name)
            else:
                fx_kind, fn, args, kwargs = implementation(op, ins)
                if _is_active(quant):
                    if list(args[: len(ins)]) != ins:
                        raise ValueError(f"mg.model: node `{name}`: a quantized `{op['op']}` has no PyTorch implementation")
                    fn = quantized_function(op["op"], format_of(quant), fn)
                    kwargs = {"quant": quant, "fn_args": tuple(args[len(ins) :]), "fn_kwargs": kwargs}
                    args = tuple(ins)
                node = fx.create_node(fx_kind, fn, args, kwargs, name=name)
                node.meta["mase_target"] = fn
            # fx may rename a node whose name is no Python identifier; it keeps the graph's.
            node.meta["mase_name"] = name
            node.meta["mase_op"], node.meta["mase_quant"] = op, quant
            env[i] = node
        return fx, root, reused

    def _module(self, target, op, quant, state, reuse):
        """The module of a `call_module` node: the one in `reuse` when it lowers to the same op
        and formats, otherwise a new one holding the graph's weights."""
        active = quant if _is_active(quant) else None
        cand = reuse.get(target)
        if op["op"] == "opaque":
            if cand is None:
                raise ValueError(
                    f"mg.model: node `{target}` is a PyTorch module kept whole ({op['class']}), which this graph no longer "
                    "holds (a graph read from a file keeps only its name); trace the module again"
                )
            return cand
        if cand is not None and _module_op(cand) == op and (getattr(cand, "quant", None) or None) == active:
            return cand
        prefix = target + "."
        own = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        m = torch_fx.module_from_op(op, own)
        return quantized_module(m, active) if active else m

    # Tracking where the graph's tensors live in the view.

    def _edges(self):
        """Every (parent's child table, name, child) of the module tree."""
        edges, todo = [], [self.module]
        while todo:
            parent = todo.pop()
            for name, child in parent._modules.items():
                edges.append((parent._modules, name, child))
                if child is not None:
                    todo.append(child)
        return edges

    def _same_structure(self):
        """Whether the module tree and the fx code are those last lowered: a flat pass over the
        tree's edges, cheap enough for every forward."""
        if self.module._code is not self.code:
            return False
        for table, name, child in self.edges:
            if table.get(name) is not child:
                return False
        return True

    def _track(self):
        raw = self.mg._raw
        self.names = list(raw.state_dict())
        self.trainable = list(raw.trainable_names())
        self.slots, self.seen, self.shapes = {}, {}, {}
        for name in self.names:
            owner_path, _, attr = name.rpartition(".")
            owner = self.module.get_submodule(owner_path) if owner_path else self.module
            is_param = attr in owner._parameters
            t = (owner._parameters if is_param else owner._buffers)[attr]
            self.slots[name] = (owner, attr, is_param)
            self.seen[name] = _stamp(t)
            self.shapes[name] = tuple(t.shape)
        self.buffers = [n for n in self.names if n not in set(self.trainable)]
        self.opaque = any(n.meta.get("mase_op", {}).get("op") == "opaque" for n in self.module.graph.nodes)
        self._arrays = None
        self.batch_norms = [m for m in self.module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        self.edges = self._edges()
        self.code = self.module._code
        self.signature = self._signature()

    def tensor(self, name):
        owner, attr, is_param = self.slots[name]
        return (owner._parameters if is_param else owner._buffers).get(attr)

    def _signature(self):
        return self.mg._raw.view_records()

    # View to graph.

    def to_rust(self):
        """Lowers the view's changes into the graph: a new module tree is lowered again, changed
        tensors are copied."""
        if self.module is None:
            return
        if not self._same_structure():
            self.relower()
            return
        updates = {}
        dirty = set(self.buffers) if self.buffers_dirty else ()
        self.buffers_dirty = False
        for name in self.names:
            t = self.tensor(name)
            if t is None or tuple(t.shape) != self.shapes[name]:
                self.relower()
                return
            k = _stamp(t)
            if k != self.seen[name] or name in dirty:
                updates[name] = _numpy(t)
                self.seen[name] = k
        if updates:
            self.mg._raw.set_params(updates)

    def relower(self):
        """Lowers the whole view into a new graph (the module tree changed)."""
        records, trainable, constants = torch_fx.node_records(self.module, lower=_lower_view_node)
        state = torch_fx._state_arrays(self.module)
        state.update(constants)
        self.mg._raw.relower(json.dumps({"nodes": records, "trainable_constants": trainable}), dict(state))
        self.mg._nodes = None
        self.mg._opaque = None
        self._track()

    # Graph to view.

    def from_rust(self):
        """Takes the graph's changes into the view: new modules where a node's op or formats
        changed, and every tensor's values."""
        if self.module is None:
            return
        if self._signature() == self.signature:
            self._pull_weights()
            self._track()
            return
        module = self.module
        training = module.training
        reuse = dict(module.named_modules())
        fx, root, _ = self._fx_graph(reuse)
        for target, value in root.items():
            owner_path, _, attr = target.rpartition(".")
            if isinstance(value, nn.Module):
                if reuse.get(target) is not value:
                    module.add_submodule(target, value) if owner_path else setattr(module, attr, value)
            else:
                owner = module.get_submodule(owner_path) if owner_path else module
                owner._parameters.pop(attr, None)
                owner._buffers.pop(attr, None)
                if isinstance(value, nn.Parameter):
                    owner.register_parameter(attr, value)
                else:
                    owner.register_buffer(attr, value)
        module.graph = fx
        module.delete_all_unused_submodules()
        self._pull_weights()
        module.train(training)
        self._track()

    def _pull_weights(self):
        """Copies every tensor of the graph into the view (in place; a new tensor where the
        shape changed)."""
        state = self.mg._raw.state_dict()
        trainable = set(self.mg._raw.trainable_names())
        with torch.no_grad():
            for name, value in state.items():
                owner_path, _, attr = name.rpartition(".")
                owner = self.module.get_submodule(owner_path) if owner_path else self.module
                is_param = attr in owner._parameters
                t = (owner._parameters if is_param else owner._buffers).get(attr)
                new = torch.from_numpy(np.array(value))
                if t is not None and tuple(t.shape) == tuple(new.shape):
                    t.copy_(new.to(t.device, t.dtype))
                elif name in trainable:
                    owner._buffers.pop(attr, None)
                    owner.register_parameter(attr, nn.Parameter(new))
                else:
                    owner._parameters.pop(attr, None)
                    owner.register_buffer(attr, new)

    def pull_buffers(self):
        """After a train-mode forward on the executor: batch norm's running statistics and its
        batch count."""
        if self.buffers:
            state = self.mg._raw.state_entries(self.buffers)
            with torch.no_grad():
                for name in self.buffers:
                    t = self.tensor(name)
                    t.copy_(torch.from_numpy(state[name]))
                    self.seen[name] = _stamp(t)
        self.count_batches(1)

    def buffer_arrays(self):
        """The view's buffers as numpy arrays sharing their memory, for the executor's train-mode
        forward to write batch norm's running statistics into (made again when a buffer
        changed identity)."""
        arrays = self._arrays
        tensors = [self.tensor(n) for n in self.buffers]
        if arrays is None or any(a[0] is not t for a, t in zip(arrays, tensors)):
            arrays = [(t, t.detach().numpy()) for t in tensors]
            self._arrays = arrays
        return {n: a for n, (_, a) in zip(self.buffers, arrays)}

    def count_batches(self, n):
        with torch.no_grad():
            for m in self.batch_norms:
                if m.num_batches_tracked is not None:
                    m.num_batches_tracked.add_(n)

    # Running on the executor.

    def runs_in_rust(self, x):
        if backend.get_backend() != "rust" or not isinstance(x, torch.Tensor) or self.opaque:
            return False
        if x.device.type != "cpu" or not (x.dtype == torch.float32 or _ids_in_float32(x)):
            return False
        probe = self.tensor(self.names[0]) if self.names else None
        if probe is not None and probe.device.type != "cpu":
            return False
        # The executor differentiates train-mode forwards only; an eval-mode forward that autograd
        # records (frozen batch norm while fine-tuning, saliency) runs in PyTorch.
        if not self.module.training and torch.is_grad_enabled():
            return not (x.requires_grad or any(self.tensor(n).requires_grad for n in self.trainable))
        return True

    def rust_forward(self, module, x):
        x = x if x.dtype == torch.float32 else x.to(torch.float32)
        self.to_rust()
        params = [self.tensor(n) for n in self.trainable]
        out = _RustFunction.apply(self, module.training, x, *params)
        if module.training:
            # The forward wrote the running statistics into the buffers.
            self.count_batches(1)
            if self.mg._torch is not None:
                self.mg._torch.batches_run(1)
        return out

    def rust_forward_many(self, module, xs):
        """`rust_forward` of a graph with several inputs or outputs: a tuple when it returns
        several values."""
        xs = [x if x.dtype == torch.float32 else x.to(torch.float32) for x in xs]
        self.to_rust()
        params = [self.tensor(n) for n in self.trainable]
        outs = _RustManyFunction.apply(self, module.training, len(xs), *xs, *params)
        if module.training:
            self.count_batches(1)
            if self.mg._torch is not None:
                self.mg._torch.batches_run(1)
        return outs[0] if len(outs) == 1 else outs


_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _ids_in_float32(x):
    """Whether `x` holds integers (token ids, class indices) that float32 represents exactly, as
    the executor reads its inputs: within 2**24 in magnitude."""
    if x.dtype not in _INTEGER_DTYPES:
        return False
    return x.numel() == 0 or (int(x.min()) >= -(2**24) and int(x.max()) <= 2**24)


def _stamp(t):
    """What changes when a tensor's values may have: its identity, its version (bumped by
    in-place ops such as an optimizer step) and its storage (`.data` replaced, as `.to()` does)."""
    return id(t), t._version, t.data_ptr()


def _numpy(t):
    return t.detach().to("cpu", torch.float32).contiguous().numpy()


def _lower_view_node(node, module):
    """The IR op and formats of a view node built from the graph (the op it was made from), or
    None when the node is not one (a user's edit): `torch_fx.node_records` then maps it."""
    if node.op in ("call_function", "call_method") and "mase_op" in node.meta and node.meta.get("mase_target") is node.target:
        return node.meta["mase_op"], node.meta.get("mase_quant")
    if node.op == "call_module":
        m = module.get_submodule(node.target)
        kept = node.meta.get("mase_op") or {}
        if kept.get("op") == "opaque" and kept.get("class") == getattr(m, "opaque_class", type(m).__name__):
            # The same kind of module kept whole: its measured output shape still holds.
            return kept, None
        quant = getattr(m, "quant", None)
        if quant is not None:
            op = _module_op(m)
            if op is None:
                return None
            return op, quant
    return None


def view_of(mg, reuse=None, training=True):
    """Builds `mg`'s view (see the module's doc)."""
    link = Link(mg)
    return link, link.build(reuse or {}, training)


# What a pending view answers without building the module tree.
_PENDING_OWN = frozenset({"training", "train", "eval", "_become", "_pending_mg", "__class__", "__dict__"})


class _PendingView(MaseModule):
    """`mg.model` before it is built. Building the module tree costs milliseconds, so switching
    train/eval mode (`mg.model.eval()`, which MASE code does for every candidate of a search)
    and a numpy forward do not build it; anything else does, and the object becomes the built
    module (its class and contents), so references to it stay valid."""

    def __init__(self, mg):
        object.__setattr__(self, "_pending_mg", mg)

    def __getattribute__(self, name):
        if name in _PENDING_OWN:
            if name == "training":
                return object.__getattribute__(self, "_pending_mg")._mode.training
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "_become")()
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if name == "training":
            object.__getattribute__(self, "_pending_mg")._mode.training = bool(value)
            return
        self._become()
        setattr(self, name, value)

    def __delattr__(self, name):
        self._become()
        delattr(self, name)

    def train(self, mode=True):
        object.__getattribute__(self, "_pending_mg")._mode.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], np.ndarray):
            return object.__getattribute__(self, "_pending_mg").forward(args[0])
        self._become()
        return self(*args, **kwargs)

    def _become(self):
        mg = object.__getattribute__(self, "_pending_mg")
        link, real = mg._build_view()
        object.__setattr__(self, "__class__", type(real))
        d = object.__getattribute__(self, "__dict__")
        d.clear()
        d.update(real.__dict__)
        link.module = self
        link._track()


def pending_view(mg):
    """`mg.model` to build on first real use (see `_PendingView`)."""
    return _PendingView(mg)
