"""Opaque regions: the parts of a traced forward that mase-rs has no ops for, kept as PyTorch
code (needs torch).

A model's forward may use code mase-rs cannot lower: a function it lacks (`torch.roll`), indexing
by a tensor (`bias[self.index]`), a module call it does not expand (`nn.MultiheadAttention` with
a mask, which returns a tuple), a function of a library (`torchvision.ops`), a check
(`torch._assert`). Rather than refusing the model, `carve` cuts the traced `GraphModule` into the
ops mase-rs has and *regions*: each tensor that the rest of the graph reads from such code is
computed by one `OpaqueRegion` module, which runs the fx nodes it covers with PyTorch. The graph
sees a region as one `opaque` node with the region's tensor inputs and its measured output shape,
so analyses see every shape, quantize leaves the region in float, and `ch`, export and hardware
name it in one-line refusals. `mg.model` runs it, forward and backward, with the rest.

Rules, checked on two forward runs at batch sizes 2 and 3:
- a value a region reads that is not a float tensor (`x.shape`, an `int`, a tuple, an integer
  index table) is computed inside the region;
- a region's output is a tensor whose first dimension is the batch (mase-rs's opaque nodes carry
  the batch through); where a region's value is not (a table computed from parameters), the
  nodes reading it join the region;
- a region's first input carries the batch; its other inputs may be any tensors (parameters);
- nodes that no tensor outside a region depends on (`torch._assert` checks and what only they
  read) are dropped: mase-rs checks shapes itself.

The modules a region calls and the tensors it reads that mase-rs does not hold (integer index
tables) stay where they are in the module tree, so state-dict names do not change; the region
finds them in its root module when it runs.
"""

import torch
import torch.fx
import torch.nn as nn

from mase_rs.ir.graph.torch_fx import _attribute


class OpaqueRegion(nn.Module):
    """Part of a traced forward that PyTorch runs: the fx nodes of `graph` (placeholders for the
    region's inputs), whose modules and attributes are looked up in the root module set with
    `set_root` when it runs. `opaque_class` names what it holds (`MultiheadAttention`,
    `getattr+getitem+expand`); `paths` are the module paths it calls and `tensors` the paths of
    the tensors it reads that mase-rs does not hold (integer index tables)."""

    def __init__(self, graph, opaque_class, paths, tensors):
        super().__init__()
        self.__dict__["_region_graph"] = graph
        self.__dict__["_region_root"] = None
        self.__dict__["_region_runner"] = None
        self.opaque_class = opaque_class
        self.paths = list(paths)
        self.tensors = list(tensors)
        self.transient = []

    def set_root(self, root):
        self.__dict__["_region_root"] = root
        self.__dict__["_region_runner"] = None

    def forward(self, *args):
        runner = self.__dict__["_region_runner"]
        if runner is None:
            root = self.__dict__["_region_root"]
            if root is None:
                raise RuntimeError(f"OpaqueRegion ({self.opaque_class}) runs inside the module it was cut from")
            runner = self.__dict__["_region_runner"] = torch.fx.Interpreter(root, garbage_collect_values=True, graph=self._region_graph)
        # mase-rs drops `.contiguous()` (it computes nothing), so an input may arrive strided
        # where the original code made it contiguous before a `view`.
        return runner.run(*(a.contiguous() if isinstance(a, torch.Tensor) else a for a in args))

    def __getstate__(self):
        # The root is the module that holds this one: a copy of the two sets it again
        # (`set_roots`), so that a copy never runs against the original's modules.
        state = dict(self.__dict__)
        state["_region_root"] = None
        state["_region_runner"] = None
        return state

    def extra_repr(self):
        return self.opaque_class


def _regions(module):
    return [m for m in module.modules() if isinstance(m, OpaqueRegion)]


def region_modules(module):
    """The paths of the modules that the regions inside `module` call."""
    return {p for r in _regions(module) for p in r.paths}


def region_tensors(module):
    """The paths of the tensors that the regions inside `module` read where they are, each with
    whether it belongs in the state dict."""
    return {p: p not in r.transient for r in _regions(module) for p in r.tensors}


def set_roots(module):
    """Points every region inside `module` at it."""
    for r in _regions(module):
        r.set_root(module)


def install(root, path, value, persistent=True):
    """Puts a module or tensor at the dotted `path` of `root` unless it is there, with plain
    modules above it where the path has none (as `torch.fx.GraphModule` builds its tree)."""
    *above, name = path.split(".")
    owner = root
    for part in above:
        child = getattr(owner, part, None)
        if child is None:
            child = nn.Module()
            owner.add_module(part, child)
        owner = child
    if getattr(owner, name, None) is value:
        return
    if isinstance(value, nn.Module):
        owner.add_module(name, value)
    elif isinstance(value, nn.Parameter):
        owner.register_parameter(name, value)
    else:
        owner.register_buffer(name, value, persistent=persistent)


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm, garbage_collect_values=False)
        self.values = {}

    def run_node(self, n):
        value = super().run_node(n)
        self.values[n] = value
        return value


def _values(gm, sample_shape, batch):
    modes = [(m, m.training) for m in gm.modules()]
    gm.eval()
    try:
        with torch.no_grad():
            recorder = _Recorder(gm)
            recorder.run(torch.zeros(batch, *sample_shape))
    except Exception as e:  # the user's forward may raise anything
        line = " ".join(str(e).split("\n")[0].split())
        raise ValueError(f"a forward run on a batch of shape {[batch, *sample_shape]} failed: {type(e).__name__}: {line}") from None
    finally:
        for m, mode in modes:
            m.training = mode
    return recorder.values


def _float_tensor(v):
    return isinstance(v, torch.Tensor) and v.is_floating_point()


def _label(gm, nodes):
    """What a region holds, for people: the classes of the modules it calls, else the functions
    and methods it applies."""
    classes = [type(gm.get_submodule(n.target)).__name__ for n in nodes if n.op == "call_module"]
    if classes:
        names = classes
    else:
        names = [n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target)) for n in nodes if n.op != "get_attr"]
    unique = list(dict.fromkeys(names))
    return "+".join(unique[:4]) + ("+..." if len(unique) > 4 else "")


def carve(gm, failed, sample_shape, saved):
    """Rewrites `gm` in place: the nodes named in `failed` (no mase-rs op), with everything they
    need by the rules above, become `OpaqueRegion` call_module nodes. `saved` are the names in
    the user's state dict (fx's own constants are not). Returns the number of regions. Raises
    one-line `ValueError`s where a rule cannot be met."""
    if sample_shape is None:
        raise ValueError("a sample shape is needed to keep code mase-rs has no op for as PyTorch code (pass dataset_info=)")
    small, large = _values(gm, sample_shape, 2), _values(gm, sample_shape, 3)
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}

    def batched(n):
        a, b = small.get(n), large.get(n)
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dim() > 0
            and (a.shape[0], b.shape[0]) == (2, 3)
            and a.shape[1:] == b.shape[1:]
        )

    inside = {n for n in nodes if n.name in failed and n.op not in ("placeholder", "output")}
    # Checks (`torch._assert(h == 224)`) and what only they read compute nothing the model
    # returns: they go first, so that the sizes they read stay the graph's.
    dead = set()
    for n in reversed(nodes):
        if n in inside and all(u in dead for u in n.users):
            dead.add(n)
    for n in reversed(nodes):
        if n in dead:
            gm.graph.erase_node(n)
    inside -= dead
    nodes = [n for n in nodes if n not in dead]
    changed = True
    while changed:
        changed = False
        for n in sorted(inside, key=order.get):
            # A value a region reads that is no float tensor (a size, a tuple, an integer index
            # table) is computed inside the region: the graph's edges into a region are tensors.
            for a in n.all_input_nodes:
                if a not in inside and a.op != "placeholder" and not _float_tensor(small.get(a)):
                    inside.add(a)
                    changed = True
            readers = [u for u in n.users if u not in inside]
            if not readers or batched(n):
                continue
            for u in readers:
                if u.op == "output":
                    what = "no tensor" if not isinstance(small.get(n), torch.Tensor) else "a tensor without the batch first"
                    raise ValueError(f"node `{n.name}` returns {what} to the model's output, which mase-rs cannot keep as PyTorch code")
                inside.add(u)
            changed = True
    outputs = sorted((n for n in inside if any(u not in inside for u in n.users)), key=order.get)
    taken = set(dict(gm.named_children())) | set(dir(gm))
    for out in outputs:
        # The nodes of `inside` this output needs, and the tensors outside it they read.
        covered, todo = set(), [out]
        while todo:
            n = todo.pop()
            if n in covered:
                continue
            covered.add(n)
            todo.extend(a for a in n.all_input_nodes if a in inside)
        body = sorted(covered, key=order.get)
        reads = sorted({a for n in body for a in n.all_input_nodes if a not in inside}, key=order.get)
        first = next((a for a in reads if batched(a)), None)
        if first is None:
            raise ValueError(f"node `{out.name}` is computed by code mase-rs has no op for from no tensor that carries the batch")
        reads = [first] + [a for a in reads if a is not first]
        name = f"opaque_{out.name}"
        while name in taken:
            name += "_"
        taken.add(name)
        graph = torch.fx.Graph()
        env = {a: graph.placeholder(f"in_{i}") for i, a in enumerate(reads)}
        held = {}
        for n in body:
            env[n] = graph.node_copy(n, lambda a: env[a])
            if n.op == "get_attr" and not isinstance(_attribute(gm, n.target), torch.Tensor):
                # A value that is no tensor goes with the region.
                held[f"attr_{len(held)}"] = _attribute(gm, n.target)
                env[n].target = f"{name}.attr_{len(held) - 1}"
        graph.output(env[out])
        paths = [n.target for n in body if n.op == "call_module"]
        tensors = [n.target for n in body if n.op == "get_attr" and isinstance(_attribute(gm, n.target), torch.Tensor)]
        region = OpaqueRegion(graph, _label(gm, body), paths, tensors)
        # fx's own constants (`_tensor_constant0`) are not in the user's state dict.
        region.transient = [p for p in tensors if p not in saved]
        region.__dict__.update(held)
        region.set_root(gm)
        gm.add_module(name, region)
        with gm.graph.inserting_after(out):
            call = gm.graph.call_module(name, tuple(reads))
        call.meta["mase_name"] = out.meta.get("mase_name", out.name)
        out.replace_all_uses_with(call, delete_user_cb=lambda u: u not in inside and u is not call)
    for n in sorted(inside, key=order.get, reverse=True):
        gm.graph.erase_node(n)
    gm.recompile()
    return len(outputs)
