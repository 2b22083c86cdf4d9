"""Prints one JSON line describing the machine and the PyTorch build a benchmark runs on.

usage: machine.py
The line is {"machine": {...}} with the CPU model, its logical CPU count, the vector extensions
the kernels can use (from /proc/cpuinfo's flags: sse4_2, avx, avx2, fma, avx512f, avx512bw,
avx512vl, avx512dq, avx512_vnni, avx512_bf16, amx_tile), the kernel's load average when the run
started, and PyTorch's version, the instruction set its CPU kernels dispatched to
(`torch.backends.cpu.get_cpu_capability()`), whether oneDNN (mkldnn) is built in, and the first
lines of `torch.__config__.show()`. bench/run.sh writes it as the first line of results.jsonl and
table.py prints it above the tables.
"""
import json
import os
import platform

VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                "avx512_vnni", "avx512_bf16", "amx_tile")


def cpuinfo():
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return model or platform.processor() or "unknown CPU", [f for f in VECTOR_FLAGS if f in flags]


def torch_build():
    try:
        import torch
    except ImportError as e:
        return {"error": f"torch not importable: {e}"}
    config = torch.__config__.show().strip().splitlines()
    return {
        "version": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "config": [l.strip() for l in config[:8]],
    }


def main():
    model, flags = cpuinfo()
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    print(json.dumps({"machine": {"cpu": model, "logical_cpus": os.cpu_count(), "vector_flags": flags,
                                  "load_average": load, "torch": torch_build()}}))


if __name__ == "__main__":
    main()
