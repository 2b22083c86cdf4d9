"""Checkpoint loading (`chop.tools.checkpoint_load`)."""

import os


def load_model(load_name, load_type="mz", model=None):
    """A `MaseGraph` read from a mase-rs checkpoint (`best.ckpt`, `last.ckpt`; graph and
    weights in one file). `load_type` is MASE's (`mz`, `pl`, `pt`); mase-rs recognises its own
    checkpoints by content. Weights of PyTorch/Lightning files need the model's graph, which is
    `ch test MODEL DATASET --load FILE`'s job for now."""
    from mase_rs.ir.graph.mase_graph import MaseGraph

    return MaseGraph(model=os.fspath(load_name))
