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
from mase_rs._convert import like, to_numpy

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


class _Model:
    """`mg.model`: calls forward, switches train/eval mode, reads and loads weights."""

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

    >>> import numpy as np
    >>> from mase_rs import get_model, get_dataset_info
    >>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
    >>> mg.model.eval().training
    False
    >>> mg(np.zeros((3, 16), dtype=np.float32)).shape
    (3, 5)
    """

    def __init__(self, model, dataset_info=None, seed=0, **_torch_fx_options):
        from mase_rs.models import ZooModel

        if isinstance(model, _native.NativeGraph):
            native = model
        elif isinstance(model, MaseGraph):
            native = model._native.clone_graph()
        elif isinstance(model, ZooModel):
            native = model._native.clone_graph()
        elif isinstance(model, (str, os.PathLike)):
            shape = list(dataset_info.sample_shape) if dataset_info is not None else None
            classes = dataset_info.num_classes if dataset_info is not None else None
            native = _native.NativeGraph.from_file(os.fspath(model), shape, classes, seed)
        else:
            raise ValueError(
                f"MaseGraph: model must be a zoo model (get_model), a file path or a MaseGraph, not {type(model).__name__}"
            )
        self._native = native
        self._nodes = None
        self.model = _Model(self)
        self.fx_graph = _FxGraph(self)

    # Nodes and metadata.

    @property
    def nodes(self):
        """The nodes in topological order."""
        if self._nodes is None:
            rows = json.loads(self._native.nodes_json())
            self._nodes = {r["name"]: Node(self, r) for r in rows}
        return list(self._nodes.values())

    def _node(self, name):
        self.nodes
        return self._nodes[name]

    def _write_meta(self, node, part, value):
        self._native.set_node_meta_json(node, part, json.dumps(value))

    def _changed(self):
        self._nodes = None

    # Running the model.

    def forward(self, x=None, **inputs):
        """The model's output for a batch `x` (`[N, ...sample]`, numpy or torch), as the same
        kind of array; `mg(x)` and `mg(**{"x": x})` are the same call."""
        if x is None:
            if len(inputs) != 1:
                raise ValueError(f"MaseGraph: the model takes one input, got {len(inputs)}")
            x = next(iter(inputs.values()))
        out = self._native.forward(to_numpy(x), self.model.training)
        return like(out, x)

    __call__ = forward

    def state_dict(self):
        """Weights and buffers by PyTorch's state-dict names, as float32 numpy arrays."""
        return self._native.state_dict()

    def load_state_dict(self, state, strict=True):
        """Sets weights from a state dict (numpy arrays or torch tensors)."""
        arrays = {k: to_numpy(v, f"state_dict entry `{k}`") for k, v in state.items()}
        self._native.load_state_dict(arrays, strict)

    def save(self, path):
        """Writes a mase-rs checkpoint that `MaseGraph(model=path)` and `ch test --load` read."""
        self._native.save_checkpoint(os.fspath(path))

    def __deepcopy__(self, memo):
        other = MaseGraph(self._native.clone_graph())
        other.model.training = self.model.training
        return other

    def __copy__(self):
        return self.__deepcopy__({})

    def __str__(self):
        return str(self._native)

    def __repr__(self):
        return f"MaseGraph({self._native.label!r}, {len(self.nodes)} nodes)"
