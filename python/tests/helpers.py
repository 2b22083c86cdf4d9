"""Helpers the Python tests share: configs written from Python tables, and a graph's weight width."""

import json

from mase_rs.passes.graph.utils import get_mase_op


def toml_text(table):
    """`table` (nested dicts of strings, numbers, booleans and lists) as TOML text: one `[a.b]`
    header per dict, in insertion order, so that a `[passes]` table keeps its pass order."""
    return "\n".join(toml_lines(table, "")) + "\n"


def toml_lines(table, prefix):
    lines = [f"[{prefix}]"] if prefix else []
    lines += [f"{key} = {json.dumps(value)}" for key, value in table.items() if not isinstance(value, dict)]
    for key, value in table.items():
        if isinstance(value, dict):
            lines += toml_lines(value, f"{prefix}.{key}" if prefix else key)
    return lines


def write_toml(tmp_path, name, table):
    """`table` written as TOML to `tmp_path / name`; returns the path."""
    path = tmp_path / name
    path.write_text(toml_text(table))
    return path


def mixed_precision_space(**linear):
    """The by-type mixed-precision space over jsc-tiny's Linear: unquantized by default, and the
    `integer` choices of `linear` (lists of widths) for every Linear."""
    return {
        "name": "graph/quantize/mixed_precision_ptq",
        "setup": {"by": "type"},
        "seed": {"default": {"config": {"name": ["NA"]}}, "linear": {"config": {"name": ["integer"], **linear}}},
    }


def weight_width(mg):
    """The weight width of the graph's first Linear."""
    fc = [n for n in mg.nodes if get_mase_op(n) == "linear"][0]
    return fc.meta["mase"].parameters["common"]["args"]["weight"]["precision"][0]
