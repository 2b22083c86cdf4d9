"""`MaseGraph`: a model held by mase-rs as a torch.fx-like graph with MASE's per-node metadata.

The graph, its metadata and its weights live in Rust; nodes and metadata read and write them.

>>> from mase_rs import MaseGraph, get_model, get_dataset_info
>>> info = get_dataset_info("jsc")
>>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", info))
>>> [n.name for n in mg.fx_graph.nodes]
['x', 'seq_blocks_0', 'seq_blocks_1', 'seq_blocks_2', 'seq_blocks_3', 'output']
"""

import json
import os
from collections.abc import MutableMapping

from mase_rs import _native
from mase_rs._checks import integer, number
from mase_rs._convert import is_torch_module, like, to_numpy

_PARTS = ("common", "software", "hardware")


class _LiveDict(MutableMapping):
    """A dict inside a node's metadata part that reads the Rust metadata on every access and
    writes the whole part back on every change, so nested edits
    (`meta["common"]["args"]["data_in_0"]["precision"] = [8, 4]`) reach the graph."""

    def __init__(self, graph, node, part, path=()):
        self._graph, self._node, self._part, self._path = graph, node, part, path

    def _read_part(self):
        return json.loads(self._graph._native.node_meta_json(self._node, self._part))

    def _here(self, part):
        d = part
        for k in self._path:
            d = d[k]
        return d

    def __getitem__(self, key):
        v = self._here(self._read_part())[key]
        if isinstance(v, dict):
            return _LiveDict(self._graph, self._node, self._part, self._path + (key,))
        return v

    def __setitem__(self, key, value):
        part = self._read_part()
        self._here(part)[key] = value.to_dict() if isinstance(value, _LiveDict) else value
        self._graph._write_meta(self._node, self._part, part)

    def __delitem__(self, key):
        part = self._read_part()
        del self._here(part)[key]
        self._graph._write_meta(self._node, self._part, part)

    def __iter__(self):
        return iter(list(self._here(self._read_part())))

    def __len__(self):
        return len(self._here(self._read_part()))

    def to_dict(self):
        """A plain (detached) copy."""
        return self._here(self._read_part())

    def __repr__(self):
        return repr(self.to_dict())


class MaseMetadata:
    """`node.meta["mase"]`: `parameters["common" | "software" | "hardware"]` as live mappings."""

    def __init__(self, graph, node):
        self.graph, self.node = graph, node
        self.parameters = {p: _LiveDict(graph, node, p) for p in _PARTS}

    def __getitem__(self, key):
        return self.parameters[key]

    def __setitem__(self, key, value):
        if key not in _PARTS:
            raise KeyError(f"no metadata part `{key}`; the parts are common, software, hardware")
        self.graph._write_meta(self.node, key, value)

    def __repr__(self):
        return f"MaseMetadata({self.node!r})"


class Node:
    """A graph node as torch.fx shows it: `name`, `op` (`placeholder`, `call_module`, ...),
    `target`, `args` (input nodes), `users` (a dict of consumer nodes) and `meta["mase"]`."""

    def __init__(self, graph, row):
        self.graph = graph
        self.name = row["name"]
        self.op = row["op"]
        self.target = row["target"]
        self.module = row["module"]
        self._args, self._users = row["args"], row["users"]
        self.meta = {"mase": MaseMetadata(graph, self.name)}

    @property
    def args(self):
        return tuple(self.graph._node(n) for n in self._args)

    @property
    def users(self):
        return {self.graph._node(n): None for n in self._users}

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, Node) and other.graph is self.graph and other.name == self.name

    def __hash__(self):
        return hash((id(self.graph), self.name))


class _FxGraph:
    """`mg.fx_graph`: the node list."""

    def __init__(self, mg):
        self._mg = mg

    @property
    def nodes(self):
        return self._mg.nodes

    def __str__(self):
        return str(self._mg._native)


def _torch_installed():
    import importlib.util

    return importlib.util.find_spec("torch") is not None


class _Model:
    """`mg.model` without torch: calls forward, switches train/eval mode, reads and loads
    weights. With torch, `mg.model` is a `torch.fx.GraphModule` (`mase_rs.ir.graph.view`)."""

    def __init__(self, mg):
        self._mg = mg
        self.training = True

    def __call__(self, *args, **kwargs):
        return self._mg.forward(*args, **kwargs)

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        return self._mg.state_dict()

    def load_state_dict(self, state, strict=True):
        return self._mg.load_state_dict(state, strict)


class MaseGraph:
    """A model in mase-rs's graph IR.

    `model` is a zoo model from `get_model(...)`, a path (model TOML, `.onnx`/QONNX file, or a
    mase-rs checkpoint), or another `MaseGraph`. A model TOML needs `dataset_info`.
    The model starts in train mode, as a PyTorch module does; call `mg.model.eval()` for
    inference with batch norm's running statistics.

    For a `torch.nn.Module`, `input_dtypes` gives the dtypes of forward arguments that are not
    float32 tensors, by argument name: a mask passed to the forward
    (`input_dtypes={"src_key_padding_mask": torch.bool}`) then loads as graph ops
    (`where(mask, -inf, 0)` added to the attention scores, as PyTorch does), where without it
    the attention module stays PyTorch code. Bool arguments reach the graph as 1.0 and 0.0.

    >>> import numpy as np
    >>> from mase_rs import get_model, get_dataset_info
    >>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
    >>> mg.model.eval().training
    False
    >>> mg(np.zeros((3, 16), dtype=np.float32)).shape
    (3, 5)
    """

    def __init__(self, model, dataset_info=None, seed=0, concrete_args=None, conv_algo=None, input_dtypes=None, **_torch_fx_options):
        from mase_rs.models import ZooModel

        if input_dtypes and not is_torch_module(model):
            raise ValueError(f"MaseGraph: input_dtypes applies to a torch.nn.Module, not {type(model).__name__}")
        self._torch = None
        if isinstance(model, _native.NativeGraph):
            native = model
        elif isinstance(model, MaseGraph):
            native = model._native.clone_graph()
            self._torch = model._torch.copy() if model._torch is not None else None
        elif isinstance(model, ZooModel):
            native = model._native.clone_graph()
        elif isinstance(model, (str, os.PathLike)):
            shape = list(dataset_info.sample_shape) if dataset_info is not None else None
            classes = dataset_info.num_classes if dataset_info is not None else None
            native = _native.NativeGraph.from_file(os.fspath(model), shape, classes, seed)
        elif is_torch_module(model):
            from mase_rs.ir.graph.torch_fx import from_module

            shape = dataset_info.sample_shape if dataset_info is not None else None
            native, self._torch = from_module(model, shape, concrete_args, input_dtypes)
        else:
            raise ValueError(
                "MaseGraph: model must be a zoo model (get_model), a torch.nn.Module, a file path or a MaseGraph, "
                f"not {type(model).__name__}"
            )
        self._raw = native
        self._nodes = None
        self._mode = _Model(self)
        self._link = None
        self._pending = None
        self._opaque = None
        if is_torch_module(model):
            # A traced module keeps the train/eval mode it had.
            self._mode.training = bool(model.training)
        elif isinstance(model, MaseGraph):
            self._mode.training = model._training()
        self.fx_graph = _FxGraph(self)
        if conv_algo is not None:
            self.conv_algo = conv_algo

    @property
    def conv_algo(self):
        """How the executor computes convolutions (forward, backward, `fit`): `"fast"` (the
        default: Winograd for the stride-1 3x3 convolutions where it measured faster, F(4x4,
        3x3) where the sums have at least 64 channels and F(2x2, 3x3) otherwise, direct sums
        elsewhere), `"exact"` (direct im2col + GEMM sums everywhere) or `"winograd"` (Winograd,
        with the same tiles, wherever it applies). Winograd differs from the direct sums by
        rounding only, within the error bound of a direct float32 sum; it is the same setting
        as `ch train --conv-algo`. Also a keyword of the constructor.

        >>> from mase_rs import MaseGraph, get_model
        >>> from mase_rs.dataset import DatasetInfo
        >>> cifar = DatasetInfo(name="cifar-shaped", num_classes=10, sample_shape=(3, 32, 32))
        >>> mg = MaseGraph(get_model("vgg7", "cls", cifar), conv_algo="exact")
        >>> mg.conv_algo
        'exact'
        >>> mg.conv_algo = "winograd"
        >>> mg.conv_algo
        'winograd'
        """
        return self._raw.conv_algo

    @conv_algo.setter
    def conv_algo(self, value):
        if not isinstance(value, str):
            raise TypeError(f"conv_algo: expected one of 'fast', 'exact', 'winograd', got {type(value).__name__} {value!r}")
        self._raw.set_conv_algo(value)

    # The PyTorch view.

    @property
    def _native(self):
        """The Rust graph, with the view's changes lowered into it first."""
        if self._link is not None:
            self._link.to_rust()
        return self._raw

    @property
    def model(self):
        """The model as PyTorch sees it: with torch installed, a `torch.fx.GraphModule` whose
        nodes are this graph's and whose submodules are real `torch.nn` modules (the user's own
        for a traced module); without torch, a small object that runs the model, switches
        train/eval mode and reads weights."""
        if self._link is None and _torch_installed():
            if self._pending is None:
                from mase_rs.ir.graph.view import pending_view

                self._pending = pending_view(self)
            return self._pending
        return self._link.module if self._link is not None else self._mode

    def _build_view(self):
        """Builds the view that `mg.model` stands for: returns the link and the module."""
        from mase_rs.ir.graph.view import view_of

        reuse = {}
        if self._torch is not None and not self._torch.detached:
            gm = self._torch.gm
            from mase_rs.ir.graph.regions import region_modules, region_tensors

            # The modules the graph calls, and what opaque regions call and read.
            targets = {n.target for n in gm.graph.nodes if n.op == "call_module"} | region_modules(gm)
            reuse = {t: gm.get_submodule(t) for t in targets}
            for path in region_tensors(gm):
                owner, _, name = path.rpartition(".")
                reuse[path] = getattr(gm.get_submodule(owner) if owner else gm, name)
        self._link, module = view_of(self, reuse, self._mode.training)
        return self._link, module

    @property
    def modules(self):
        """Target to module, as MASE's `mg.modules` (`dict(mg.model.named_modules())`)."""
        return dict(self.model.named_modules())

    def _training(self):
        return self._link.module.training if self._link is not None else self._mode.training

    # Nodes and metadata.

    @property
    def nodes(self):
        """The nodes in topological order."""
        native = self._native  # lowers the view's edits first, which may renew the nodes
        if self._nodes is None:
            rows = json.loads(native.nodes_json())
            self._nodes = {r["name"]: Node(self, r) for r in rows}
        return list(self._nodes.values())

    def _node(self, name):
        self.nodes
        return self._nodes[name]

    def _write_meta(self, node, part, value):
        self._native.set_node_meta_json(node, part, json.dumps(value))

    def _has_opaque(self):
        """Whether the graph holds PyTorch modules kept whole (`opaque` nodes)."""
        native = self._native
        if self._opaque is None:
            self._opaque = '"op":"opaque"' in native.view_records()
        return self._opaque

    def _changed(self):
        """Called after mase-rs changed the graph (a pass, new weights): the node list is read
        again and the view takes the change."""
        self._nodes = None
        self._opaque = None
        if self._link is not None:
            self._link.from_rust()

    # Running the model.

    def forward(self, *xs, **inputs):
        """The model's output for a batch `x` (`[N, ...sample]`, numpy or torch), as the same
        kind of array; `mg(x)` and `mg(**{"x": x})` are the same call. A model with several
        inputs takes one batch per input, in the forward's order or by name (`mg(a, b)`,
        `mg(a=a, b=b)`); one returning a tuple or list returns a tuple of arrays."""
        xs = self._arguments(xs, inputs)
        n_in, n_out = self._native.io_counts
        training = self._training()
        if self._torch is not None and self._has_opaque():
            # PyTorch runs a graph with modules kept whole.
            import torch

            model = self.model
            model.train(training)
            with torch.no_grad():
                out = model(*[torch.from_numpy(to_numpy(x, f"input {k}")) for k, x in enumerate(xs)])
            outs = [like(o.numpy(), xs[0]) for o in (out if isinstance(out, (tuple, list)) else (out,))]
            return outs[0] if n_out == 1 else tuple(outs)
        if n_in == 1 and n_out == 1:
            outs = [self._native.forward(to_numpy(xs[0]), training)]
        else:
            outs = self._native.forward_many([to_numpy(x, f"input {k}") for k, x in enumerate(xs)], training)
        if training and self._torch is not None:
            self._torch.batches_run(1)
        if training and self._link is not None:
            self._link.pull_buffers()
        outs = [like(o, xs[0]) for o in outs]
        return outs[0] if n_out == 1 else tuple(outs)

    def _arguments(self, xs, inputs):
        """The batches of a call, one per graph input in the forward's order: positional, or by
        the forward's argument names (one input takes any name, as before)."""
        names = [n.target for n in self.nodes if n.op == "placeholder"]
        if inputs and xs:
            raise TypeError("MaseGraph: give the inputs either by position or by name, not both")
        if inputs:
            if len(names) == 1 and len(inputs) == 1:
                return [next(iter(inputs.values()))]
            unknown = sorted(set(inputs) - set(names))
            missing = [n for n in names if n not in inputs]
            if unknown or missing:
                raise TypeError(
                    f"MaseGraph: the model's inputs are {', '.join(names)}; "
                    + "; ".join(p for p in (f"unknown {', '.join(unknown)}" if unknown else "", f"missing {', '.join(missing)}" if missing else "") if p)
                )
            return [inputs[n] for n in names]
        if len(xs) != len(names):
            raise TypeError(f"MaseGraph: the model takes {len(names)} input(s) ({', '.join(names)}), got {len(xs)}")
        return list(xs)

    __call__ = forward

    def state_dict(self):
        """Weights and buffers by PyTorch's state-dict names, as float32 numpy arrays; for a
        graph traced from a `torch.nn.Module`, the module's whole state dict as torch tensors
        (`num_batches_tracked` included), so that `module.load_state_dict(mg.state_dict())`
        puts the weights trained here back into the module."""
        if self._torch is not None:
            if self._link is not None:
                # Batch norm counts its batches in the view, whichever engine ran them, and
                # modules kept whole hold their own tensors there.
                views = self._link.module.state_dict()
                for k in self._torch.bn_batches:
                    if k in views:
                        self._torch.bn_batches[k] = int(views[k])
                for k in self._torch.extra:
                    if k in views:
                        self._torch.extra[k] = views[k].detach().clone()
            return self._torch.state_dict(self._native.state_dict())
        return self._native.state_dict()

    def load_state_dict(self, state, strict=True):
        """Sets weights from a state dict (numpy arrays or torch tensors)."""
        if self._torch is not None:
            state = self._torch.split(state)
            # The graph's own constants (`x * 2.0`) are not in the module's state dict.
            own = {k: v for k, v in self._native.state_dict().items() if k not in self._torch.keys and k not in state}
            state = {**state, **own}
        arrays = {k: to_numpy(v, f"state_dict entry `{k}`") for k, v in state.items()}
        self._native.load_state_dict(arrays, strict)
        self._changed()

    def fit(
        self, data, epochs=1, batch_size=None, lr=1e-3, optimizer="adam", weight_decay=0.0, momentum=0.0, shuffle=True, seed=0
    ):
        """Trains the model here, in mase-rs: `epochs` passes over the training data in
        mini-batches (forward in train mode, mean cross-entropy, backward, one optimizer step
        with PyTorch's update formulas and a constant `lr`). `data` is a `MaseDataModule` (its
        train split and batch size) or a pair `(x, y)` of arrays or torch tensors (float
        samples `[N, ...]`, int class indices `[N]`). `optimizer` is `adam`, `adamw` or `sgd`
        (with `momentum`). Each epoch visits the samples in a new order drawn from `seed` when
        `shuffle`. Leaves the model in train mode; returns one
        `{"epoch", "loss", "accuracy"}` dict per epoch (mean over the epoch's samples).

        >>> import numpy as np
        >>> from mase_rs import MaseGraph, get_model, get_dataset_info
        >>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
        >>> x = np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32)
        >>> y = (x[:, 0] > 0).astype(np.int64)
        >>> hist = mg.fit((x, y), epochs=3, batch_size=16, lr=1e-2)
        >>> [h["epoch"] for h in hist], hist[-1]["loss"] < hist[0]["loss"]
        ([0, 1, 2], True)
        """
        import numpy as np

        if isinstance(data, (tuple, list)) and len(data) == 2:
            x, y = data
            batch_size = 32 if batch_size is None else batch_size
        elif hasattr(data, "train_dataloader"):
            if data._splits is None:
                data.setup()
            x, y = data._splits["train"]
            batch_size = data.batch_size if batch_size is None else batch_size
        else:
            raise ValueError(f"fit: data must be a MaseDataModule or a pair (x, y), not {type(data).__name__}")
        epochs = integer(epochs, "fit: epochs", 1)
        batch_size = integer(batch_size, "fit: batch_size", 1)
        lr = number(lr, "fit: lr", positive=True)
        weight_decay = number(weight_decay, "fit: weight_decay", positive=False)
        momentum = number(momentum, "fit: momentum", positive=False)
        seed = integer(seed, "fit: seed", 0)
        xs = to_numpy(x, "fit: x")
        ys = np.asarray(y.detach().cpu().numpy() if hasattr(y, "detach") else y)
        if not np.issubdtype(ys.dtype, np.integer):
            raise ValueError(f"fit: y: expected integer class indices, got an array of {ys.dtype}")
        ys = np.ascontiguousarray(ys, dtype=np.int64)
        if self._link is not None:
            self._link.module.train()
        self._mode.training = True
        stats = self._native.fit(
            xs,
            ys,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            optimizer=str(optimizer),
            weight_decay=weight_decay,
            momentum=momentum,
            shuffle=bool(shuffle),
            seed=seed,
        )
        if self._torch is not None:
            steps = -(-len(ys) // batch_size) * epochs
            self._torch.batches_run(steps)
        if self._link is not None:
            self._changed()
            self._link.count_batches(-(-len(ys) // batch_size) * epochs)
        return [{"epoch": i, "loss": loss, "accuracy": acc} for i, (loss, acc) in enumerate(stats)]

    def _actual_target(self, node):
        """What `get_node_actual_target` returns for a `call_module` node: its module in
        `mg.model` (with torch installed)."""
        if _torch_installed():
            return self.model.get_submodule(node.target)
        return node.module

    def save(self, path):
        """Writes a mase-rs checkpoint that `MaseGraph(model=path)` and `ch test --load` read."""
        self._native.save_checkpoint(os.fspath(path))

    def __deepcopy__(self, memo):
        return MaseGraph(self)

    def __copy__(self):
        return self.__deepcopy__({})

    def __str__(self):
        return str(self._native)

    def __repr__(self):
        return f"MaseGraph({self._native.label!r}, {len(self.nodes)} nodes)"
