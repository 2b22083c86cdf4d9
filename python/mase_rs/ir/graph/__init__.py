"""The graph IR (`chop.ir.graph`)."""

from mase_rs.ir.graph.mase_graph import MaseGraph, MaseMetadata, Node

__all__ = ["MaseGraph", "MaseMetadata", "Node"]
