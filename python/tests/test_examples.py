"""The lab scripts of `python/examples` run and reproduce their labs' code tasks (each script
checks its own results; these tests check a few of the figures they return)."""

import importlib.util
from pathlib import Path


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_lab_has_a_script():
    assert sorted(p.stem for p in EXAMPLES.glob("lab*.py")) == ["lab1", "lab2", "lab3", "lab4"]


def test_lab1_trains_and_the_checkpoint_scores_the_same_in_python(data_dir):
    results = load("lab1").main()
    assert set(results) == {"jsc-tiny lr=0.001", "jsc-tiny lr=0.01", "jsc-my"}
    assert all(0.0 <= v <= 1.0 for v in results.values())


def test_lab2_quantizes_and_the_python_flops_pass_agrees(data_dir):
    r = load("lab2").main()
    # jsc-toy: three Linear layers quantized, every weight on the grid.
    assert (r["quantized"], r["off_grid"]) == (3, 0)
    assert r["flops"] > 0


def test_lab3_loops_agree(data_dir):
    r = load("lab3").main()
    assert len(r["recorded"]) == 16 and len(r["brute"].trials) == 16 and len(r["tpe"].trials) == 8


def test_lab4_widens_and_searches(data_dir):
    r = load("lab4").main()
    assert [r[m]["widths"] for m in (1, 2, 4)] == [[16, 16, 5], [32, 32, 5], [64, 64, 5]]
    assert r[1]["params"] < r[2]["params"] < r[4]["params"]


def test_lab3_notebook_cells_run(data_dir, monkeypatch):
    import json

    monkeypatch.chdir(EXAMPLES)
    nb = json.loads((EXAMPLES / "lab3_study.ipynb").read_text())
    scope = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "lab3_study.ipynb", "exec"), scope)
    assert len(scope["study"].trials) == 16 and len(scope["tpe"].trials) == 8
