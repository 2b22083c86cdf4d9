"""Passes (`chop.passes`)."""

from mase_rs.passes import graph
from mase_rs.passes.graph import *  # noqa: F401,F403
from mase_rs.passes.graph import __all__  # noqa: F401
