"""Your own passes and search runners, run by `transform(...)` and `search(...)` from a TOML
config as if they were built in.

A pass is `fn(mg, pass_args) -> (mg, info)`, as MASE's passes are: `register_pass("my_flops",
fn)` makes a `[passes.my_flops]` table run it (its keys are `pass_args`; `info` must be JSON-like:
dicts, lists, numbers, strings). A runner is `fn(mg, data_module, config) -> {metric: number}`:
`register_runner("my_acc", fn)` makes a `[search.strategy.sw_runner.my_acc]` (or `hw_runner`)
table measure each candidate with it (`config` is that table).

>>> import mase_rs
>>> @mase_rs.register_pass("count_linear")
... def count_linear(mg, pass_args):
...     n = sum(1 for node in mg.nodes if mase_rs.get_mase_op(node) == "linear")
...     return mg, {"linear_layers": n}
>>> "count_linear" in mase_rs.registered_passes()
True
>>> mase_rs.unregister_pass("count_linear")
"""

import json
import math

from mase_rs._convert import to_json

_PASSES = {}
_RUNNERS = {}


def _check_name(kind, name):
    if not isinstance(name, str) or not name or not name.replace("_", "a").replace("-", "a").isalnum():
        raise ValueError(f"register_{kind}: the name must be letters, digits, `_` and `-` (a TOML key), got {name!r}")


def register_pass(name, fn=None):
    """Registers `fn(mg, pass_args) -> (mg, info)` as the pass `name` of `[passes.<name>]`
    tables; a pass of the registry keeps its name (a table naming it runs the built-in one).
    Works as a decorator too (`@register_pass("my_pass")`). Returns `fn`.

    >>> import mase_rs
    >>> def tag(mg, pass_args):
    ...     return mg, {"tag": pass_args.get("tag")}
    >>> mase_rs.register_pass("tag", tag) is tag
    True
    >>> mase_rs.unregister_pass("tag")
    """
    _check_name("pass", name)
    if fn is None:
        return lambda f: register_pass(name, f)
    if not callable(fn):
        raise ValueError(f"register_pass: `{name}` must be a function fn(mg, pass_args) -> (mg, info)")
    _PASSES[name] = fn
    return fn


def register_runner(name, fn=None, metrics=None):
    """Registers `fn(mg, data_module, config) -> {metric: number}` as the search runner `name`
    of `[search.strategy.sw_runner.<name>]` and `hw_runner` tables. `metrics` lists what it
    returns, so a config whose objective reads another metric is refused before the first
    trial; without it, a missing metric fails the first trial. Works as a decorator too.
    Returns `fn`.

    >>> import mase_rs
    >>> @mase_rs.register_runner("param_count", metrics=["params"])
    ... def param_count(mg, data_module, config):
    ...     return {"params": sum(v.size for v in mg.state_dict().values())}
    >>> sorted(mase_rs.registered_runners())
    ['param_count']
    >>> mase_rs.unregister_runner("param_count")
    """
    _check_name("runner", name)
    if fn is None:
        return lambda f: register_runner(name, f, metrics)
    if not callable(fn):
        raise ValueError(f"register_runner: `{name}` must be a function fn(mg, data_module, config) -> dict of metrics")
    _RUNNERS[name] = (fn, None if metrics is None else [str(m) for m in metrics])
    return fn


def unregister_pass(name):
    """Forgets the pass `name` (no error when it is not registered).

    >>> import mase_rs
    >>> _ = mase_rs.register_pass("noop", lambda mg, pass_args: (mg, {}))
    >>> mase_rs.unregister_pass("noop"); "noop" in mase_rs.registered_passes()
    False
    """
    _PASSES.pop(name, None)


def unregister_runner(name):
    """Forgets the runner `name` (no error when it is not registered).

    >>> import mase_rs
    >>> _ = mase_rs.register_runner("one", lambda mg, dm, config: {"one": 1.0})
    >>> mase_rs.unregister_runner("one"); "one" in mase_rs.registered_runners()
    False
    """
    _RUNNERS.pop(name, None)


def registered_passes():
    """The registered passes, `{name: fn}` (a copy).

    >>> import mase_rs
    >>> mase_rs.registered_passes()
    {}
    """
    return dict(_PASSES)


def registered_runners():
    """The registered runners, `{name: fn}` (a copy).

    >>> import mase_rs
    >>> mase_rs.registered_runners()
    {}
    """
    return {k: f for k, (f, _m) in _RUNNERS.items()}


def _runner_table():
    return dict(_RUNNERS)


def _call_pass(name, fn, native, args_json):
    """Called by Rust: runs a user pass on the lent graph; returns the graph it returned and
    its info as JSON."""
    from mase_rs.ir.graph.mase_graph import MaseGraph

    out = fn(MaseGraph(native), json.loads(args_json) or {})
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], MaseGraph)):
        raise TypeError(f"pass `{name}` must return (mg, info), got {type(out).__name__}")
    mg, info = out
    return mg._native, to_json({} if info is None else info, f"pass `{name}`: info")


_DATA_MODULES = {}


def _call_runner(name, fn, native, dataset, batch_size, data_dir, table_json):
    """Called by Rust: runs a user runner on a candidate; returns the (possibly trained)
    candidate and its metrics as JSON."""
    from mase_rs.dataset import MaseDataModule
    from mase_rs.ir.graph.mase_graph import MaseGraph

    key = (dataset, batch_size, data_dir)
    if key not in _DATA_MODULES:
        dm = MaseDataModule(name=dataset, batch_size=batch_size, data_dir=data_dir)
        dm.prepare_data()
        dm.setup()
        _DATA_MODULES[key] = dm
    mg = MaseGraph(native)
    mg.model.eval()
    metrics = fn(mg, _DATA_MODULES[key], json.loads(table_json) or {})
    if not isinstance(metrics, dict):
        raise TypeError(f"runner `{name}` must return a dict of metrics, got {type(metrics).__name__}")
    out = {}
    for k, v in metrics.items():
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            raise TypeError(f"runner `{name}`: metric `{k}` must be a number, got {type(v).__name__}") from None
        if not math.isfinite(out[str(k)]):
            raise ValueError(f"runner `{name}`: metric `{k}` is {v}; metrics must be finite")
    return mg._native, json.dumps(out)


__all__ = [
    "register_pass",
    "register_runner",
    "registered_passes",
    "registered_runners",
    "unregister_pass",
    "unregister_runner",
]
