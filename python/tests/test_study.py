"""`Study`: ask-and-tell gives the trials `ch search` runs (same sampler, seed and values),
keeps them in SQLite across sessions, and builds each trial's candidate."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mase_rs
from helpers import mixed_precision_space, toml_text, weight_width
from conftest import ch_command  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SPACE = mixed_precision_space(weight_width=[2, 3, 4, 5, 6, 7, 8], weight_frac_width=[1], data_in_width=[4, 8],
                              data_in_frac_width=[2], bias_width=[8], bias_frac_width=[4])

STRATEGY = {
    "hw_runner": {"average_bitwidth": {"compare_to": 32}},
    "setup": {"sampler": "SAMPLER", "n_trials": 10, "seed": 3, "sum_scaled_metrics": False},
    "sampler_options": {"n_startup_trials": 3},
    "metrics": {"average_bitwidth": {"scale": 1.0, "direction": "minimize"}},
}
TOML = toml_text({"model": "jsc-tiny", "dataset": "jsc", "seed": 0, "project": "s",
                  "search": {"search_space": SPACE, "strategy": STRATEGY}})


@pytest.fixture
def base(jsc_info):
    mg = mase_rs.MaseGraph(model=mase_rs.get_model("jsc-tiny", "cls", jsc_info))
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": np.zeros((8, 16), np.float32)}, "add_value": False})
    return mg


@pytest.mark.parametrize("sampler", ["tpe", "random", "nsgaii", "qmc"])
def test_ask_tell_proposes_what_ch_search_runs(tmp_path, base, sampler):
    text = TOML.replace("SAMPLER", sampler)
    if sampler != "tpe":
        text = text.replace("n_startup_trials = 3", "")
    config = tmp_path / "s.toml"
    config.write_text(text)
    r = subprocess.run([*ch_command(), "search", "--config", str(config), "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    log = json.loads((tmp_path / "mase_output/s/software/search_ckpts/log.json").read_text())
    cli = [t["user_attrs_sampled_config"]["seq_blocks_2"]["config"] for t in log.values()]

    study = mase_rs.Study.from_config(config, base)
    told = []
    for _ in range(10):
        trial = study.ask()
        candidate = study.build(trial)
        study.tell(trial, {"average_bitwidth": float(weight_width(candidate))})
        told.append(trial.config["seq_blocks_2"]["config"])
    assert told == cli
    assert len({(c["weight_width"], c["data_in_width"]) for c in told}) > 1


def test_brute_force_visits_every_point_once_then_stops(base):
    study = mase_rs.Study(SPACE, base, sampler="brute", direction="minimize")
    seen = []
    while (trial := study.ask()) is not None:
        seen.append((trial.params["seq_blocks_2/config/weight_width"], trial.params["seq_blocks_2/config/data_in_width"]))
        study.tell(trial, trial.params["seq_blocks_2/config/weight_width"])
    assert sorted(seen) == sorted((w, d) for w in range(2, 9) for d in (4, 8)) and len(seen) == 14
    assert study.best_trial.value == 2.0
    assert {t.params["seq_blocks_2/config/weight_width"] for t in study.best_trials} == {2}
    assert study.ask() is None


def test_candidate_is_the_quantized_model(base, jsc_batch):
    study = mase_rs.Study(SPACE, base, sampler="random", seed=5)
    trial = study.ask()
    candidate = study.build(trial)
    # The sampled config names every node (MASE's `sampled_config`): applied by name.
    by_hand, _ = mase_rs.quantize_transform_pass(mase_rs.MaseGraph(model=base), {"by": "name", **trial.config})
    by_hand.model.eval()
    np.testing.assert_array_equal(candidate(jsc_batch), by_hand(jsc_batch))
    assert weight_width(candidate) == trial.params["seq_blocks_2/config/weight_width"]


def test_sqlite_study_resumes_where_it_stopped(tmp_path, base):
    db = tmp_path / "study.db"
    first = mase_rs.Study(SPACE, base, sampler="tpe", storage=db, name="lab3", seed=1)
    for _ in range(3):
        t = first.ask()
        first.tell(t, 1.0 * t.number)
    left = first.ask()
    again = mase_rs.Study(SPACE, base, sampler="tpe", storage=f"sqlite:///{db}", name="lab3", mode="resume", seed=1)
    trials = again.trials
    assert [(t.number, t.state) for t in trials] == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "COMPLETE"), (3, "FAIL")]
    assert trials[3].error.startswith("interrupted:") and left.number == 3
    nxt = again.ask()
    # The interrupted point is handed out again first.
    assert nxt.number == 4 and nxt.config == left.config
    narrower = {**SPACE, "seed": {**SPACE["seed"], "linear": {"config": {**SPACE["seed"]["linear"]["config"], "weight_width": [2, 4]}}}}
    with pytest.raises(ValueError, match="study `lab3`: the stored study has another space"):
        mase_rs.Study(narrower, base, storage=db, name="lab3", mode="resume")


def test_metrics_objective_and_errors(base):
    study = mase_rs.Study(SPACE, base, sampler="random", metrics={"accuracy": "maximize", "average_bitwidth": "minimize"})
    assert study.objectives == ["accuracy", "average_bitwidth"]
    t = study.ask()
    told = study.tell(t, {"software": {"accuracy": 0.5}, "hardware": {"average_bitwidth": 4}})
    assert (told.state, told.values, told.hardware_metrics) == ("COMPLETE", [0.5, 4.0], {"average_bitwidth": 4.0})
    with pytest.raises(ValueError, match="trial 0 is COMPLETE, not RUNNING"):
        study.tell(t, [1, 2])
    t = study.ask()
    with pytest.raises(ValueError, match=r"told 1 value\(s\), the objective has 2 \(accuracy, average_bitwidth\)"):
        study.tell(t, 0.5)
    missing = study.tell(t, {"accuracy": 0.5})
    assert missing.state == "FAIL" and "average_bitwidth" in missing.error
    with pytest.raises(ValueError, match="no trial 99"):
        study.tell(99, [1, 2])
    failed = study.tell(study.ask(), "diverged", state="fail")
    assert (failed.state, failed.error) == ("FAIL", "diverged")
    with pytest.raises(ValueError, match="unknown sampler `annealing`"):
        mase_rs.Study(SPACE, base, sampler="annealing")
    with pytest.raises(ValueError, match="must be a MaseGraph"):
        mase_rs.Study(SPACE, "jsc-tiny")


def test_from_config_reads_lab3(base):
    study = mase_rs.Study.from_config(REPO / "configs/lab3_tied_pairs_search.toml", base)
    assert study.sampler == "brute" and len(study.param_names) == 5
    n = 0
    while (trial := study.ask()) is not None:
        study.tell(trial, [trial.params["linear/config/data_in"][0] / 10, trial.params["linear/config/weight"][0] / 10])
        n += 1
    assert n == 16


def test_postgres_study_is_shared_by_two_handles(base):
    # Without a server the test skips with one line, except under CI=true (as the Rust storage
    # tests do), where the README's test command always provides one.
    if not os.environ.get("MASE_TEST_POSTGRES_URL"):
        if os.environ.get("CI") == "true":
            pytest.fail("no PostgreSQL under CI=true: run under scripts/with-postgres.sh", pytrace=False)
        pytest.skip("no PostgreSQL: run under scripts/with-postgres.sh")
    url, name = os.environ["MASE_TEST_POSTGRES_URL"], f"py-{os.getpid()}"
    first = mase_rs.Study(SPACE, base, sampler="random", storage=url, name=name, seed=2)
    second = mase_rs.Study(SPACE, base, sampler="random", storage=url, name=name, mode="join", seed=2)
    a, b = first.ask(), second.ask()
    assert (a.number, b.number) == (0, 1)
    second.tell(b, 2.0)
    first.tell(a, 1.0)
    assert [(t.number, t.value) for t in second.trials] == [(0, 1.0), (1, 2.0)]
