"""Turns the JSON lines of mase-bench and pytorch_ref.py into markdown comparison tables.

usage: table.py RESULTS.jsonl
Cases are matched on (model, batch, threads); where a case ran several times (run.sh --repeat),
each side keeps its best rate. ratio = mase-rs samples/s / PyTorch samples/s.
"""
import json
import math
import os
import platform
import sys

PHASES = (("Training", "train_samples_per_s"), ("Eval", "eval_samples_per_s"))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line(machines):
    """The machine and PyTorch build of the runs, from bench/machine.py's lines (the CPU read now
    when the file has none, as files written before run.sh recorded it)."""
    if not machines:
        return f"Machine: {cpu_name()}, {os.cpu_count()} logical CPUs (read when the table was made), shared with other work. "
    m = machines[-1]
    torch = m.get("torch", {})
    loads = sorted({tuple(x.get("load_average") or ()) for x in machines})
    text = (f"Machine: {m.get('cpu')}, {m.get('logical_cpus')} logical CPUs, vector extensions "
            f"{', '.join(m.get('vector_flags') or ['none found'])}; PyTorch {torch.get('version')} "
            f"(CPU kernels: {torch.get('cpu_capability')}, oneDNN {'on' if torch.get('mkldnn') else 'off'}). "
            f"Load average at the start of each run (1, 5, 15 min): {'; '.join(', '.join(map(str, l)) for l in loads)}. ")
    if len({(x.get("cpu"), x.get("logical_cpus")) for x in machines}) > 1:
        text += "Warning: the runs in this file were made on different machines. "
    return text


def fmt_rate(v):
    return f"{v / 1e6:.3f} M/s" if v >= 1e4 else f"{v:.1f}/s"


def rate(r, key):
    v = r.get(key)
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def main():
    lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
    machines = [l["machine"] for l in lines if "machine" in l]
    # mase-bench --conv exact|winograd and --fusion off lines are A/B measurements of the
    # convolution algorithm and the fused epilogues; the tables compare the defaults with PyTorch.
    rows = [l for l in lines if "framework" in l and l.get("conv", "fast") == "fast" and l.get("fusion", "on") == "on"]
    best, runs, order = {}, {}, []
    for r in rows:
        case = (r["threads"], r["model"], r["batch"])
        if case not in order:
            order.append(case)
        runs[(case, r["framework"])] = runs.get((case, r["framework"]), 0) + 1
        for _, key in PHASES:
            v = rate(r, key)
            k = (case, r["framework"], key)
            if v is not None and v > best.get(k, 0.0):
                best[k] = v
    torch_version = next((r.get("torch") for r in rows if r.get("torch")), None)
    repeats = max(runs.values(), default=1)
    out = ["# mase-rs vs PyTorch eager: samples/s", "",
           machine_line(machines) +
           "Each figure is batch / median time of the timed steps after warm-up"
           + (f", best of {repeats} runs" if repeats > 1 else "") + ". "
           "Training step: forward, cross-entropy, backward, Adam (lr 1e-3). "
           "Batch 256 for the tabular and MNIST models; one CIFAR batch of 32 and one of 128 for vgg7."
           + (f" PyTorch {torch_version}, eager, `torch.set_num_threads(N)`." if torch_version else ""), ""]
    for threads in sorted({c[0] for c in order}):
        for phase, key in PHASES:
            out += [f"## {phase}, {threads} thread{'s' if threads > 1 else ''}", "",
                    "| model | mase-rs samples/s | PyTorch samples/s | ratio |", "|---|---|---|---|"]
            for case in order:
                t, model, batch = case
                if t != threads:
                    continue
                label = f"{model} (batch {batch})" if model == "vgg7" else model
                m, p = best.get((case, "mase-rs", key)), best.get((case, "torch", key))
                ratio = f"{m / p:.2f}x" if m and p else "-"
                out.append(f"| {label} | {fmt_rate(m) if m else '-'} | {fmt_rate(p) if p else '-'} | {ratio} |")
            out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
