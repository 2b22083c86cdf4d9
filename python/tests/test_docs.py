"""The examples in the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

import mase_rs

MODULES = sorted(m.name for m in pkgutil.walk_packages(mase_rs.__path__, "mase_rs.") if not m.name.endswith("_native"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, data_dir):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_module_is_covered():
    assert "mase_rs.ir.graph.mase_graph" in MODULES and "mase_rs.dataset" in MODULES
