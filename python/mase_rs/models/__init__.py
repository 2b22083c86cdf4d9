"""The model zoo (`chop.models`): `get_model`, `get_model_info`.

>>> from mase_rs.models import get_model, get_model_info
>>> get_model_info("jsc-tiny")["dataset"]
'jsc'
"""

from mase_rs import _native
from mase_rs._convert import like, to_numpy


def get_model_info(name):
    """What the zoo says about a model: `name`, `description`, `family` and `dataset`."""
    return _native.model_info(name)


class ZooModel:
    """A zoo model built for a data set, with the initial weights `ch train --seed <seed>`
    draws; `model(x)` / `model(**dummy_in)` run it (eval mode), `MaseGraph(model=model)` takes it."""

    def __init__(self, name, dataset_info, seed=0):
        self.name, self.dataset_info, self.seed = name, dataset_info, seed
        self._native = self._native_graph()

    def _native_graph(self):
        return _native.NativeGraph.from_zoo(
            self.name, list(self.dataset_info.sample_shape), int(self.dataset_info.num_classes), int(self.seed)
        )

    def __call__(self, x=None, **inputs):
        if x is None:
            if len(inputs) != 1:
                raise ValueError(f"model `{self.name}` takes one input, got {len(inputs)}")
            x = next(iter(inputs.values()))
        return like(self._native.forward(to_numpy(x), False), x)

    def state_dict(self):
        return self._native.state_dict()

    def __repr__(self):
        return f"ZooModel({self.name!r})"


def get_model(name, task="cls", dataset_info=None, pretrained=False, checkpoint=None, seed=0, **_options):
    """The zoo model `name` for the data set `dataset_info` (from `get_dataset_info`; by
    default the model's own data set). `task` must be `cls` (classification); `checkpoint`
    loads a mase-rs checkpoint instead of fresh weights.

    >>> from mase_rs.dataset import get_dataset_info
    >>> m = get_model("jsc-tiny", "cls", get_dataset_info("jsc"))
    >>> m.state_dict()["seq_blocks.2.weight"].shape
    (5, 16)
    """
    if task not in ("cls", "classification"):
        raise ValueError(f"get_model: task `{task}` is not supported; mase-rs models are classifiers (`cls`)")
    if pretrained:
        raise ValueError("get_model: pretrained weights are not shipped; train with `mase_rs.train` or pass checkpoint=")
    if dataset_info is None:
        from mase_rs.dataset import get_dataset_info

        dataset_info = get_dataset_info(get_model_info(name)["dataset"])
    elif not (hasattr(dataset_info, "sample_shape") and hasattr(dataset_info, "num_classes")):
        raise TypeError(
            f"get_model: dataset_info: expected a DatasetInfo (from get_dataset_info), got {type(dataset_info).__name__} {dataset_info!r}"
        )
    model = ZooModel(name, dataset_info, seed)
    if checkpoint is not None:
        from mase_rs.tools.checkpoint_load import load_model

        model._native = load_model(checkpoint, model=model)._native
    return model


__all__ = ["ZooModel", "get_model", "get_model_info"]
