"""`ch`'s actions as functions: `train`, `test`, `transform`, `search`, with `ch`'s options as
keyword arguments (`batch_size=256` is `--batch-size 256`; `True` gives a bare flag such as
`resume=True`), each returning its JSON result (what `ch ... --json` prints) as a dict.

`transform` and `search` run in this process, with the GIL released while Rust works, so that
your passes and runners can be called; their progress and report lines go to stderr, and Ctrl-C
takes effect when the action returns. `train` and `test` run `ch` in a child process (its output
stays there, and Ctrl-C stops it at once).

Passes and runners registered with `register_pass` / `register_runner` run from the config's
tables; `search(..., objective=fn)` scores every candidate with `fn(mg, data_module, config)`
alone, as an Optuna objective does.

>>> from mase_rs import train
>>> r = train("jsc-tiny", "jsc", max_epochs=1, project_dir="/tmp/mase_rs_doc")  # doctest: +SKIP
>>> sorted(r)[:3]  # doctest: +SKIP
"""

import json
import os
import subprocess
import sys

from mase_rs import _native
from mase_rs.plugins import _runner_table, registered_passes


def _argv(action, positional, options):
    argv = [action, *[os.fspath(p) for p in positional if p is not None]]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return argv + ["--json"]


def _check_files(options):
    for key in ("config", "load"):
        path = options.get(key)
        if path is not None and not os.path.exists(os.fspath(path)):
            raise FileNotFoundError(f"{key} {os.fspath(path)}: no such file")


def run_child(action, *positional, **options):
    """Runs `ch <action> <positional...> <options...> --json` in a child Python process;
    returns its JSON result. A failing run raises `ValueError` (bad input: status 1 or 2) or
    `RuntimeError` (an internal error) with `ch`'s one-line message."""
    _check_files(options)
    argv = _argv(action, positional, options)
    r = subprocess.run([sys.executable, "-m", "mase_rs.cli", *argv], capture_output=True, text=True)
    if r.returncode != 0:
        lines = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
        line = lines[-1][len("error: ") :] if lines else f"ch {action} exited with status {r.returncode}"
        raise (RuntimeError if r.returncode == 70 else ValueError)(line)
    out = r.stdout.strip().splitlines()
    return json.loads(out[-1]) if out else {}


def run(action, *positional, _passes=None, _runners=None, _search_overrides=None, **options):
    """Runs `ch <action> <positional...> <options...>` in this process; returns its JSON
    result. A failing run raises `ValueError` (bad input: status 1 or 2) or `RuntimeError` (an
    internal error) with `ch`'s one-line message; an exception raised by a registered pass or
    runner is raised as it is."""
    _check_files(options)
    argv = ["ch", *_argv(action, positional, options)]
    data_dir = options.get("data_dir")
    status, error, result = _native.run_action(
        argv,
        _passes if _passes is not None else registered_passes(),
        _runners if _runners is not None else _runner_table(),
        [(at, json.dumps(v)) for at, v in (_search_overrides or [])],
        None if data_dir is None else os.fspath(data_dir),
    )
    if status != 0:
        line = error or f"ch {action} exited with status {status}"
        raise (RuntimeError if status == 70 else ValueError)(line)
    return json.loads(result) if result else {}


def train(model=None, dataset=None, **options):
    """`ch train MODEL DATASET [options]`: trains and writes checkpoints; returns the results."""
    return run_child("train", model, dataset, **options)


def test(model=None, dataset=None, **options):
    """`ch test MODEL DATASET --load CKPT [options]`: evaluates a checkpoint on the test split."""
    return run_child("test", model, dataset, **options)


def transform(config, model=None, dataset=None, passes=None, **options):
    """`ch transform MODEL DATASET --config CONFIG [options]`: runs the config's `[passes.*]`
    tables, built-in passes and registered Python ones (`passes={"name": fn}` adds more for
    this call). Returns the result: `passes` holds each pass's report (a Python pass's `info`).

    >>> import mase_rs
    >>> r = mase_rs.transform("my_passes.toml", "jsc-tiny", "jsc")  # doctest: +SKIP
    >>> [p["name"] for p in r["passes"]]  # doctest: +SKIP
    ['my_flops']
    """
    table = {**registered_passes(), **(passes or {})}
    return run("transform", model, dataset, config=config, _passes=table, **options)


def search(config, model=None, dataset=None, runners=None, objective=None, direction="maximize", **options):
    """`ch search MODEL DATASET --config CONFIG [options]`: searches the config's space with its
    runners, built-in and registered Python ones (`runners={"name": fn}` adds more for this
    call). `objective=fn(mg, data_module, config) -> number` makes that function's value, with
    `direction`, the only objective (an Optuna-style objective; the config's runners still run
    and their metrics are recorded).

    >>> import mase_rs
    >>> def acc(mg, data_module, config):
    ...     return 1.0
    >>> r = mase_rs.search("configs/lab3_tied_pairs_search.toml", objective=acc)  # doctest: +SKIP
    """
    table = _runner_table()
    for name, fn in (runners or {}).items():
        table[name] = fn if callable(fn) else tuple(fn)
    overrides = []
    if objective is not None:
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"search: direction must be maximize or minimize, got {direction!r}")
        def as_runner(mg, data_module, config):
            return {"objective": objective(mg, data_module, config)}

        table["objective"] = (as_runner, ["objective"])
        overrides = [
            ("/strategy/sw_runner/objective", {}),
            ("/strategy/metrics", {"objective": {"scale": 1.0, "direction": direction}}),
            ("/strategy/setup/sum_scaled_metrics", False),
        ]
    return run("search", model, dataset, config=config, _runners=table, _search_overrides=overrides, **options)


__all__ = ["run", "run_child", "search", "test", "train", "transform"]
