"""The examples in the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

import mase_rs

MODULES = sorted(m.name for m in pkgutil.walk_packages(mase_rs.__path__, "mase_rs.") if not m.name.endswith("_native"))


# Modules whose examples need torch (they skip without it).
NEEDS_TORCH = {
    "mase_rs.ir.graph.torch_fx",
    "mase_rs.ir.graph.view",
    "mase_rs.nn.functional",
    "mase_rs.nn.quantized.functional",
    "mase_rs.nn.quantized.modules",
}
# Packages whose every module needs torch.
NEEDS_TORCH_PACKAGES = ("mase_rs.nn.quantizers",)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, data_dir):
    if name in NEEDS_TORCH or name.startswith(NEEDS_TORCH_PACKAGES):
        pytest.importorskip("torch", reason="torch is not installed: its examples are skipped")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_module_is_covered():
    assert "mase_rs.ir.graph.mase_graph" in MODULES and "mase_rs.dataset" in MODULES
