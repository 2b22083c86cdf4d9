"""Every pass of mase-rs's registry as a Python function under MASE's name, generated from the
registry (`_native.pass_list()`), so a pass added in Rust appears here without Python changes.

A pass is called as in MASE, `mg, info = <name>_pass(mg, pass_args)`: it changes `mg` in place
and returns it with `info`, the pass's report as a dict (the JSON `ch transform` writes, plus
`text` and `files` where the pass prints or writes them).
"""

import json
import os

from mase_rs import _native
from mase_rs._checks import mapping
from mase_rs._convert import to_json

# Registry names whose MASE name ends in `_transform_pass` or `_interface_pass`; every other pass
# is an analysis pass (`<name>_analysis_pass`).
_TRANSFORMS = {"quantize", "channel_multiplier", "fold_batch_norm"}
_INTERFACES = {"save_node_meta_param", "load_node_meta_param"}


def mase_name(name):
    """MASE's function name for the registry's pass `name`."""
    if name in _TRANSFORMS:
        return f"{name}_transform_pass"
    if name in _INTERFACES:
        return f"{name}_interface_pass"
    return f"{name}_analysis_pass"


def _python_args(mg, name, pass_args):
    """MASE's arguments that are Python objects, applied to the graph and removed: `dummy_in`
    (a dict of arrays: its batch size and sample shape for `add_common_metadata`) and
    `input_generator` (its data set, batch size and split)."""
    args = dict(pass_args or {})
    dummy_in = args.pop("dummy_in", None)
    if dummy_in is not None and name == "add_common_metadata" and mg._native.io_counts[0] > 1:
        # One array per input, in the forward's order (MASE's `{"a": batch_a, "b": batch_b}`).
        arrays = list(dummy_in.values()) if isinstance(dummy_in, dict) else list(dummy_in)
        shapes = [_dummy_in_shape(mase_name(name), a) for a in arrays]
        if any(s is None for s in shapes):
            raise TypeError(f"{mase_name(name)}: dummy_in: a graph with several inputs needs one array per input")
        mg._native.use_input_shapes([[int(d) for d in s] for s in shapes])
        args.setdefault("batch_size", int(shapes[0][0]))
    elif dummy_in is not None and name == "add_common_metadata" and "batch_size" not in args:
        shape = _dummy_in_shape(mase_name(name), dummy_in)
        if shape is not None:
            args["batch_size"] = int(shape[0])
            # A traced module does not know its input shape before it sees one.
            mg._native.use_sample_shape([int(d) for d in shape[1:]])
    generator = args.pop("input_generator", None)
    if generator is not None:
        dm = generator.data_module
        mg._native.use_dataset(dm.name, dm.data_dir)
        mg._native.configure(batch_size=dm.batch_size)
        if "split" not in args:
            args["split"] = generator.which_dataloader
    return args


def _check_call(name, mg, pass_args):
    """Refuses a graph that is no `MaseGraph` and arguments that are no dict, naming the pass."""
    from mase_rs.ir.graph.mase_graph import MaseGraph

    what = mase_name(name)
    if not isinstance(mg, MaseGraph):
        raise TypeError(f"{what}: graph: expected a MaseGraph, got {type(mg).__name__}")
    mapping(pass_args, f"{what}: pass_args", "a dict of the pass's arguments (or None)")


def _dummy_in_shape(what, dummy_in):
    """The shape of `dummy_in`'s first array (MASE's `{"x": batch}`, or one array); None when
    its values are None (the doc example's `{"x": None}` leaves the batch size as configured)."""
    first = next(iter(dummy_in.values()), None) if isinstance(dummy_in, dict) else dummy_in
    if first is None and isinstance(dummy_in, dict):
        return None
    shape = getattr(first, "shape", None)
    if shape is None:
        raise TypeError(f"{what}: dummy_in: expected a dict of input arrays ({{\"x\": batch}}) or an array, got {type(dummy_in).__name__} {dummy_in!r}")
    if len(shape) == 0:
        raise ValueError(f"{what}: dummy_in: expected an array with a batch dimension, got a 0-d array")
    return shape


def run(name, mg, pass_args=None):
    """Runs the registry's pass `name` on `mg`; returns `(mg, info)`."""
    _check_call(name, mg, pass_args)
    args = _python_args(mg, name, pass_args)
    report = json.loads(mg._native.run_pass(name, to_json(args, f"pass `{name}`")))
    mg._changed()
    info = report["json"] if isinstance(report.get("json"), dict) else {"result": report.get("json")}
    for key in ("text", "files", "warnings"):
        if key in report:
            info.setdefault(key, report[key])
    if report.get("text"):
        print(report["text"])
    return mg, info


def _make(name, doc, args_type):
    def pass_fn(graph, pass_args=None):
        return run(name, graph, pass_args)

    pass_fn.__name__ = pass_fn.__qualname__ = mase_name(name)
    pass_fn.__doc__ = (
        f"{doc[0].upper()}{doc[1:]} (mase-rs pass `{name}`; arguments: the fields of `{args_type}`).\n\n"
        f"Returns `(graph, info)`: the graph, changed in place, and the pass's report as a dict."
    )
    return pass_fn


PASSES = {mase_name(n): _make(n, d, a) for n, d, a in _native.pass_list()}


def _summarize_quantization(ori_mg, mg, save_dir=None):
    """Compares `mg` with `ori_mg` node by node and by type (MASE's
    `summarize_quantization_analysis_pass(ori_mg, mg, save_dir=...)`); writes the tables to
    `save_dir` when given. Returns `(mg, info)`."""
    mg._native.set_original(ori_mg._native)
    args = {} if save_dir is None else {"save_dir": os.fspath(save_dir)}
    return run("summarize_quantization", mg, args)


PASSES["summarize_quantization_analysis_pass"] = _summarize_quantization
# Lab 4's name for widening linear layers.
PASSES["redefine_linear_transform_pass"] = PASSES["channel_multiplier_transform_pass"]

