"""MASE's search loop in Python, for `bench/search.sh`: Optuna's TPE sampler (multi-objective,
as the lab config) over the by-name mixed-precision space of jsc-tiny (doc/mase-semantics.md#search-worked-example:
nine `suggest_int` parameters, 18 distinct points), each trial quantizing the model's Linear with
MASE's integer fake-quantizer and evaluating 512 samples with PyTorch, then computing the average
bit width. Prints one JSON line: trials, seconds, trials per second.

usage: optuna_ref.py [--trials N] [--threads T]
"""
import argparse
import json
import time

import optuna
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytorch_ref import LinearInteger

CHOICES = {
    "seq_blocks_1/config/name": [None],
    "seq_blocks_2/config/name": ["integer"],
    "seq_blocks_2/config/data_in_width": [4, 8],
    "seq_blocks_2/config/data_in_frac_width": [None],
    "seq_blocks_2/config/weight_width": [2, 4, 8],
    "seq_blocks_2/config/weight_frac_width": [None],
    "seq_blocks_2/config/bias_width": [2, 4, 8],
    "seq_blocks_2/config/bias_frac_width": [None],
    "seq_blocks_3/config/name": [None],
}


def jsc_tiny():
    return nn.Sequential(nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5), nn.ReLU())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    base = jsc_tiny().eval()
    x = torch.randn(512, 16)
    y = torch.randint(0, 5, (512,))

    def objective(trial):
        idx = {k: trial.suggest_int(k, 0, len(v) - 1) for k, v in CHOICES.items()}
        flat = {k: CHOICES[k][i] for k, i in idx.items()}
        cfg = {}
        for k, v in flat.items():
            node, _, field = k.split("/")
            cfg.setdefault(node, {})[field] = v
        model = jsc_tiny().eval()
        model.load_state_dict(base.state_dict())
        if cfg["seq_blocks_2"]["name"] is not None:
            model[2] = LinearInteger(model[2], cfg["seq_blocks_2"])
        with torch.no_grad():
            logits = model(x)
            loss = F.cross_entropy(logits, y).item()
            acc = (logits.argmax(1) == y).float().mean().item()
        bits = [m.config["weight_width"] for m in model.modules() if isinstance(m, nn.Linear) and hasattr(m, "config")]
        avg = sum(bits) / len(bits) if bits else 32
        trial.set_user_attr("software_metrics", {"loss": loss, "accuracy": acc})
        trial.set_user_attr("hardware_metrics", {"average_bitwidth": avg, "memory_density": 32 / avg})
        return [acc, 0.2 * avg]

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=42), directions=["maximize", "minimize"])
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=a.trials)
    dt = time.perf_counter() - t0
    print(json.dumps({"side": "optuna+pytorch", "trials": a.trials, "seconds": dt, "trials_per_s": a.trials / dt, "optuna": optuna.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
