"""Turns the JSON lines of mase-bench and pytorch_ref.py into markdown comparison tables.

usage: table.py RESULTS.jsonl
Cases are matched on (model, batch, threads); ratio = mase-rs samples/s / PyTorch samples/s.
"""
import json
import os
import platform
import sys


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def fmt_rate(v):
    return f"{v / 1e6:.3f} M/s" if v >= 1e5 else f"{v:,.1f}/s"


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
    by = {}
    for r in rows:
        by.setdefault((r["threads"], r["model"], r["batch"]), {})[r["framework"]] = r
    torch_version = next((r.get("torch") for r in rows if r.get("torch")), None)
    out = ["# mase-rs vs PyTorch eager: samples/s", "",
           f"Machine: {cpu_name()}, {os.cpu_count()} logical CPUs (shared with other work). "
           f"Medians over timed steps after warm-up; Adam lr 1e-3, cross-entropy; "
           f"batch 256 for the tabular and MNIST models, one CIFAR batch of 32 and of 128 for vgg7."
           + (f" PyTorch {torch_version}." if torch_version else ""), ""]
    for threads in sorted({k[0] for k in by}):
        for phase, key in (("Training", "train_samples_per_s"), ("Eval", "eval_samples_per_s")):
            out += [f"## {phase}, {threads} thread{'s' if threads > 1 else ''}", "",
                    "| model | mase-rs samples/s | PyTorch samples/s | ratio |", "|---|---|---|---|"]
            for (t, model, batch), fw in by.items():
                if t != threads:
                    continue
                label = f"{model} (batch {batch})" if model == "vgg7" else model
                m, p = fw.get("mase-rs"), fw.get("torch")
                mr = fmt_rate(m[key]) if m else "-"
                pr = fmt_rate(p[key]) if p else "-"
                ratio = f"{m[key] / p[key]:.2f}x" if m and p and p[key] > 0 else "-"
                out.append(f"| {label} | {mr} | {pr} | {ratio} |")
            out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
