"""Data sets (`chop.dataset`): `get_dataset_info` and `MaseDataModule`.

>>> from mase_rs.dataset import MaseDataModule
>>> dm = MaseDataModule(name="jsc", batch_size=8, model_name="jsc-tiny", num_workers=0)
>>> dm.prepare_data(); dm.setup()
>>> xs, ys = next(iter(dm.train_dataloader()))
>>> tuple(xs.shape), tuple(ys.shape)
((8, 16), (8,))
"""

import json
import os
from dataclasses import dataclass, field

import numpy as np

from mase_rs import _native

_CACHE = {}


@dataclass(frozen=True)
class DatasetInfo:
    """What a data set tells a model: `num_classes`, `sample_shape` (without the batch), the
    class names and how its splits were made."""

    name: str
    num_classes: int
    sample_shape: tuple
    class_names: tuple = field(default=())
    splits_note: str = ""
    source: str = ""

    @property
    def image_size(self):
        """MASE's name for the sample shape of image data sets."""
        return self.sample_shape


def _load(name, data_dir=None):
    key = (name.strip().lower(), os.fspath(data_dir) if data_dir is not None else None)
    if key not in _CACHE:
        raw = _native.load_dataset(name, key[1])
        info = json.loads(raw["info"])
        info = DatasetInfo(
            name=info["name"],
            num_classes=info["num_classes"],
            sample_shape=tuple(info["sample_shape"]),
            class_names=tuple(info["class_names"]),
            splits_note=info["splits_note"],
            source=info["source"],
        )
        _CACHE[key] = (info, {s: raw[s] for s in ("train", "val", "test")})
    return _CACHE[key]


def get_dataset_info(name, data_dir=None):
    """The `DatasetInfo` of a data set (`jsc`, `mnist`, `digits`, `cifar10`, `toy_tiny`, ...).

    >>> get_dataset_info("jsc").num_classes
    5
    """
    return _load(name, data_dir)[0]


def _torch_or_numpy(xs, ys):
    try:
        import torch
    except ImportError:
        return xs, ys
    return torch.from_numpy(xs), torch.from_numpy(ys)


class _Loader:
    """An iterable of `(xs, ys)` batches over one split (reshuffled each pass when `shuffle`)."""

    def __init__(self, x, y, batch_size, shuffle, seed):
        self.x, self.y, self.batch_size, self.shuffle = x, y, batch_size, shuffle
        self._rng = np.random.default_rng(seed)

    def __len__(self):
        return (len(self.y) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = self._rng.permutation(len(self.y)) if self.shuffle else np.arange(len(self.y))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            yield _torch_or_numpy(self.x[idx], self.y[idx])


class MaseDataModule:
    """MASE's data module: `prepare_data()`, `setup()`, then `train_dataloader()` (shuffled),
    `val_dataloader()` and `test_dataloader()`, each yielding `(xs, ys)` batches: torch
    tensors when torch is installed, numpy arrays otherwise. Arguments MASE takes for language
    models (`max_token_len`, `tokenizer`, `load_from_cache_file`) are accepted and unused."""

    def __init__(self, name, batch_size, model_name=None, num_workers=0, data_dir=None, seed=0, **_nlp_options):
        if int(batch_size) < 1:
            raise ValueError(f"MaseDataModule: batch_size must be at least 1, got {batch_size}")
        self.name, self.batch_size, self.model_name = name, int(batch_size), model_name
        self.num_workers, self.data_dir, self.seed = num_workers, data_dir, seed
        self._splits = None

    @property
    def dataset_info(self):
        return get_dataset_info(self.name, self.data_dir)

    def prepare_data(self):
        """Checks that the data set can be read (mase-rs reads shipped or local files only)."""
        _load(self.name, self.data_dir)

    def setup(self, stage=None):
        self._splits = _load(self.name, self.data_dir)[1]

    def _loader(self, split, shuffle):
        if self._splits is None:
            self.setup()
        x, y = self._splits[split]
        return _Loader(x, y, self.batch_size, shuffle, self.seed)

    def train_dataloader(self):
        return self._loader("train", True)

    def val_dataloader(self):
        return self._loader("val", False)

    def test_dataloader(self):
        return self._loader("test", False)


__all__ = ["DatasetInfo", "MaseDataModule", "get_dataset_info"]
