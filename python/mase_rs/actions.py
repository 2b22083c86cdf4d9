"""`ch`'s actions as functions: `train`, `test`, `transform`, `search`, with `ch`'s options as
keyword arguments (`batch_size=256` is `--batch-size 256`; `True` gives a bare flag such as
`resume=True`). Each runs `ch ... --json` in a child Python process (so its progress output and
any crash stay there) and returns the JSON result as a dict.

>>> from mase_rs import train
>>> r = train("jsc-tiny", "jsc", max_epochs=1, project_dir="/tmp/mase_rs_doc")  # doctest: +SKIP
>>> sorted(r)[:3]  # doctest: +SKIP
"""

import json
import os
import subprocess
import sys


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


def run(action, *positional, **options):
    """Runs `ch <action> <positional...> <options...> --json`; returns its JSON result. A
    failing run raises `ValueError` (bad input: status 1 or 2) or `RuntimeError` (an internal
    error) with `ch`'s one-line message."""
    for key in ("config", "load"):
        path = options.get(key)
        if path is not None and not os.path.exists(os.fspath(path)):
            raise FileNotFoundError(f"{key} {os.fspath(path)}: no such file")
    argv = _argv(action, positional, options)
    r = subprocess.run([sys.executable, "-m", "mase_rs.cli", *argv], capture_output=True, text=True)
    if r.returncode != 0:
        lines = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
        line = lines[-1][len("error: ") :] if lines else f"ch {action} exited with status {r.returncode}"
        raise (RuntimeError if r.returncode == 70 else ValueError)(line)
    out = r.stdout.strip().splitlines()
    return json.loads(out[-1]) if out else {}


def train(model=None, dataset=None, **options):
    """`ch train MODEL DATASET [options]`: trains and writes checkpoints; returns the results."""
    return run("train", model, dataset, **options)


def test(model=None, dataset=None, **options):
    """`ch test MODEL DATASET --load CKPT [options]`: evaluates a checkpoint on the test split."""
    return run("test", model, dataset, **options)


def transform(config, model=None, dataset=None, **options):
    """`ch transform MODEL DATASET --config CONFIG [options]`: runs the config's passes."""
    return run("transform", model, dataset, config=config, **options)


def search(config, model=None, dataset=None, **options):
    """`ch search MODEL DATASET --config CONFIG [options]`: searches the config's space."""
    return run("search", model, dataset, config=config, **options)


__all__ = ["run", "search", "test", "train", "transform"]
