"""`Study`: ask-and-tell over a mase-rs search space, as Optuna's `study.ask()` / `study.tell()`,
for search loops you write yourself (MASE lab 3). Trials are proposed by mase-rs's samplers
(brute force, random, TPE, NSGA-II, QMC) and kept in memory, a SQLite file or a PostgreSQL
study, by the same code as `ch search`'s loop: the same seed and the same told values give the
same trials.

>>> import numpy as np
>>> from mase_rs import MaseGraph, Study, get_model, get_dataset_info
>>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
>>> space = {"name": "graph/quantize/mixed_precision_ptq", "setup": {"by": "type", "tie": "type"},
...          "seed": {"default": {"config": {"name": ["NA"]}},
...                   "linear": {"config": {"name": ["integer"], "weight_width": [4, 8],
...                                         "weight_frac_width": [2], "data_in_width": [8],
...                                         "data_in_frac_width": [4], "bias_width": [8],
...                                         "bias_frac_width": [4]}}}}
>>> study = Study(space, model=mg, sampler="brute", direction="minimize")
>>> while (trial := study.ask()) is not None:
...     candidate = study.build(trial)          # the quantized copy of mg for this trial
...     _ = study.tell(trial, trial.params["linear/config/weight_width"] / 8)
>>> [t.params["linear/config/weight_width"] for t in study.trials]
[4, 8]
>>> study.best_trial.value
0.5
"""

import json
import os
from dataclasses import dataclass, field

from mase_rs import _native


@dataclass
class Trial:
    """A trial: `number`, `params` (the chosen value of each parameter, by its flattened name
    `linear/config/weight_width`), `config` (the sampled config: for a quantization space, the
    `quantize_transform_pass` arguments), and once told `state`, `values` and the metrics.

    >>> t = Trial(number=0, params={"linear/config/weight_width": 4}, config={}, state="COMPLETE", values=[0.5])
    >>> t.value
    0.5
    """

    number: int
    params: dict
    config: dict
    state: str = "RUNNING"
    values: list = None
    software_metrics: dict = field(default_factory=dict)
    hardware_metrics: dict = field(default_factory=dict)
    error: str = None

    @property
    def value(self):
        """The value of a one-objective trial."""
        if self.values is None:
            return None
        if len(self.values) != 1:
            raise ValueError(f"trial {self.number} has {len(self.values)} values; read `values`")
        return self.values[0]

    @classmethod
    def _from_json(cls, text_or_dict):
        d = json.loads(text_or_dict) if isinstance(text_or_dict, str) else text_or_dict
        return cls(
            number=d["number"],
            params=d["params"],
            config=d["config"],
            state=d["state"],
            values=d["values"],
            software_metrics=d["software_metrics"],
            hardware_metrics=d["hardware_metrics"],
            error=d["error"],
        )


def _read_toml(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"config {path}: no such file")
    return json.loads(_native.read_toml(path))


class Study:
    """An ask-and-tell study over a search space of `model` (a `MaseGraph`).

    `space` is a `[search.search_space]` table as a dict (`name`, `setup`, `seed`; see the
    README's Search section), `sampler` one of `brute`, `random`, `tpe`, `nsgaii`, `qmc`
    (`sampler_options` as in `[search.strategy.sampler_options]`), `seed` the sampler's seed.
    The objective is either one value with `direction` (tell a number), or `metrics`:
    `{"accuracy": {"scale": 1.0, "direction": "maximize"}, ...}` (tell a dict of metrics; with
    `sum_scaled_metrics=True` they are summed into one value with `direction`). `storage` is
    `None` (in memory), a SQLite path or URL (`sqlite:///study.db`) or a PostgreSQL URL;
    `mode` is `fresh` (replace a stored study of that name), `resume` or `join` (share it with
    other workers). `Study.from_config(path_or_dict, model)` reads all of it from a MASE search
    config (`[search]`).

    >>> from mase_rs import MaseGraph, Study, get_model, get_dataset_info
    >>> mg = MaseGraph(model=get_model("jsc-tiny", "cls", get_dataset_info("jsc")))
    >>> study = Study.from_config("configs/lab3_tied_pairs_search.toml", mg)  # doctest: +SKIP
    """

    def __init__(
        self,
        space,
        model,
        sampler="tpe",
        direction="maximize",
        metrics=None,
        sum_scaled_metrics=False,
        sampler_options=None,
        seed=0,
        storage=None,
        name="study",
        mode="fresh",
    ):
        if metrics is None:
            metrics = {"value": {"scale": 1.0, "direction": direction}}
        else:
            metrics = {k: ({"scale": 1.0, "direction": v} if isinstance(v, str) else dict(v)) for k, v in metrics.items()}
        setup = {"sampler": sampler, "sum_scaled_metrics": bool(sum_scaled_metrics), "direction": direction, "seed": int(seed)}
        strategy = {"setup": setup, "metrics": metrics}
        if sampler_options is not None:
            strategy["sampler_options"] = sampler_options
        self._open({"search_space": space, "strategy": strategy}, model, storage, name, mode, seed)

    @classmethod
    def from_config(cls, config, model, storage=None, name="study", mode="fresh"):
        """A study of a MASE search config: a TOML file with a `[search]` table, or that table
        as a dict (its `search_space`, `strategy.setup` sampler and seed, `metrics`,
        `constraints`, `sampler_options` and `storage`; runners are yours to write).

        >>> study = Study.from_config("configs/lab3_tied_pairs_search.toml", mg)  # doctest: +SKIP
        >>> study.sampler, len(study.param_names)  # doctest: +SKIP
        ('brute', 5)
        """
        if isinstance(config, (str, os.PathLike)):
            config = _read_toml(os.fspath(config))
        search = config.get("search", config)
        study = cls.__new__(cls)
        url = storage if storage is not None else search.get("storage", {}).get("url")
        study._open(search, model, url, name, mode, 0)
        return study

    def _open(self, search, model, storage, name, mode, seed):
        from mase_rs.ir.graph.mase_graph import MaseGraph

        if not isinstance(model, MaseGraph):
            raise ValueError(f"Study: model must be a MaseGraph (the model whose space is searched), not {type(model).__name__}")
        self._mg = model
        self._native = _native.NativeStudy(
            json.dumps(search), model._native, str(name), None if storage is None else os.fspath(storage), mode, int(seed)
        )
        info = json.loads(self._native.describe())
        self.study_name, self.sampler, self.storage = info["name"], info["sampler"], info["storage"]
        self.param_names = [p["name"] for p in info["params"]]
        self.objectives, self.directions = info["objectives"], info["directions"]

    def ask(self):
        """The next `Trial` (claimed as running in the store), or `None` when the sampler has
        no point left (brute force over the whole space; in a shared study, also while the last
        points run on other workers, which may fail and free theirs).

        >>> trial = study.ask()  # doctest: +SKIP
        >>> trial.number, trial.params  # doctest: +SKIP
        (0, {'linear/config/weight_width': 4, ...})
        """
        text = self._native.ask()
        return None if text is None else Trial._from_json(text)

    def tell(self, trial, result=None, state="complete"):
        """Records a trial's result: a number (one objective), a list of numbers (one per
        objective), or a dict of metrics scored by the objective (`{"accuracy": 0.7}`; use
        `{"software": {...}, "hardware": {...}}` to keep the two apart). `state="fail"` records
        a failed trial (`result`: the reason). Returns the trial as stored.

        >>> study.tell(trial, 0.93)  # doctest: +SKIP
        >>> study.tell(trial, {"accuracy": 0.93, "average_bitwidth": 6})  # doctest: +SKIP
        >>> study.tell(trial, "diverged", state="fail")  # doctest: +SKIP
        """
        number = trial.number if isinstance(trial, Trial) else int(trial)
        if state == "fail":
            return Trial._from_json(self._native.tell(number, "fail", str(result or "failed")))
        if state != "complete":
            raise ValueError(f"tell: state must be complete or fail, got {state!r}")
        if isinstance(result, dict):
            parts = result if set(result) <= {"software", "hardware"} and result else {"software": result}
            payload = json.dumps({k: {m: float(v) for m, v in part.items()} for k, part in parts.items()})
            return Trial._from_json(self._native.tell(number, "metrics", payload))
        values = [result] if not isinstance(result, (list, tuple)) else list(result)
        try:
            values = [float(v) for v in values]
        except (TypeError, ValueError):
            raise ValueError(f"tell: expected a number, a list of numbers or a dict of metrics, got {result!r}") from None
        return Trial._from_json(self._native.tell(number, "values", json.dumps(values)))

    def build(self, trial):
        """The candidate `MaseGraph` of a trial: the model rebuilt from the unmodified base with
        the trial's config (quantized, or widened, as the space does).

        >>> candidate = study.build(study.ask())  # doctest: +SKIP
        >>> candidate(x).shape  # doctest: +SKIP
        (256, 5)
        """
        from mase_rs.ir.graph.mase_graph import MaseGraph

        config = trial.config if isinstance(trial, Trial) else trial
        mg = MaseGraph(self._native.build(json.dumps(config)))
        mg.model.eval()
        return mg

    @property
    def trials(self):
        """Every trial, in number order.

        >>> [t.value for t in study.trials]  # doctest: +SKIP
        [0.5, 1.0]
        """
        return [Trial._from_json(d) for d in json.loads(self._native.trials())]

    @property
    def best_trials(self):
        """The best trials: ties at the best value, or the Pareto front for several objectives.

        >>> [t.values for t in study.best_trials]  # doctest: +SKIP
        [[0.91, 4.0], [0.93, 8.0]]
        """
        return [Trial._from_json(d) for d in json.loads(self._native.best_trials())]

    @property
    def best_trial(self):
        """The best trial of a one-objective study (the first of any ties).

        >>> study.best_trial.params  # doctest: +SKIP
        {'linear/config/weight_width': 4}
        """
        best = self.best_trials
        if not best:
            raise ValueError("Study: no complete trial yet")
        return best[0]

    def __repr__(self):
        return f"Study({self.study_name!r}, sampler={self.sampler!r}, {len(self.param_names)} parameters)"


__all__ = ["Study", "Trial"]
