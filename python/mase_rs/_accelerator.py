"""`ch train|test|search --accelerator gpu`: PyTorch runs the model on a device while `ch`'s
Rust trainer drives it batch by batch, so that checkpoints, metrics, curves, TensorBoard files
and `--resume` are those of a CPU run.

The Rust side (`crates/python/src/accelerator.rs`) calls `open_engine` once per run and then the
`TorchEngine` methods. The model is `MaseGraph(native).model` moved to the device: the same
`torch.fx.GraphModule` a notebook user trains, with MASE's quantized modules and their
straight-through estimators. The optimizer is the `torch.optim` class of the same name with the
same hyper-parameters; its state moves to and from mase-rs's checkpoint format by parameter
name (`exp_avg.seq_blocks.2.weight`).
"""

import json

import numpy as np

_DEVICES = {"cuda": "a CUDA GPU", "mps": "an Apple GPU (MPS)", "cpu": "the CPU"}


def open_engine(native, device, seed, threads=0):
    """The engine for `device` (`cuda`, `mps` or `cpu`), or a one-line error saying what to
    install or choose instead. `threads` (`--threads`) sets PyTorch's CPU threads when not 0."""
    try:
        import torch
    except ImportError:
        raise RuntimeError(
            "needs PyTorch, which is not installed here: `pip install torch` (a CUDA build for a GPU), "
            "or run on the CPU with --accelerator cpu"
        ) from None
    if device == "cuda" and not torch.cuda.is_available():
        why = "this PyTorch build has no CUDA" if torch.version.cuda is None else "torch.cuda.is_available() is False"
        raise RuntimeError(
            f"PyTorch {torch.__version__} sees no CUDA device ({why}); install a CUDA build of torch on a "
            "machine with an NVIDIA GPU, or run on the CPU with --accelerator cpu"
        )
    if device == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"PyTorch {torch.__version__} sees no MPS device; run on the CPU with --accelerator cpu")
    if threads:
        torch.set_num_threads(threads)
    return TorchEngine(native, device, seed)


class TorchEngine:
    """One model on one device: train-mode batches with gradient accumulation, optimizer steps,
    eval-mode batches, and the weights and optimizer state copied back for checkpoints."""

    def __init__(self, native, device, seed):
        import torch

        from mase_rs.ir.graph.mase_graph import MaseGraph

        torch.manual_seed(seed)
        self.torch = torch
        self.device = torch.device(device)
        self.mg = MaseGraph(native)
        self.model = self.mg.model.to(self.device)
        self.optimizer = None
        self.steps = 0

    def _forward(self, x, shape, labels, train):
        from mase_rs.nn.backend import using

        torch = self.torch
        xb = torch.from_numpy(x).view(*shape).to(self.device, non_blocking=True)
        yb = torch.from_numpy(labels.astype(np.int64)).to(self.device, non_blocking=True)
        self.model.train(train)
        # On CPU tensors (`torch-cpu`) the view would hand the batch to the Rust executor.
        with using("torch"):
            out = self.model(xb)
        if out.dim() != 2 or out.shape[0] != len(labels):
            raise ValueError(f"the loss needs an output of shape [N, classes]; the model gives {list(out.shape)}")
        if len(labels) and int(labels.max()) >= out.shape[1]:
            i = int(np.argmax(labels >= out.shape[1]))
            raise ValueError(f"label {int(labels[i])} of sample {i} is out of range: the model has {out.shape[1]} classes")
        loss = torch.nn.functional.cross_entropy(out, yb)
        return out, yb, loss

    @staticmethod
    def _stats(torch, out, yb, loss):
        correct = (out.detach().argmax(1) == yb).sum()
        # One transfer from the device per batch.
        value, right = torch.stack([loss.detach().float(), correct.float()]).tolist()
        return value, int(right), int(yb.shape[0])

    def accumulate_grad(self, x, shape, labels, weight):
        """Forward and backward of a train-mode batch; returns (mean loss, correct, count)."""
        out, yb, loss = self._forward(x, shape, labels, True)
        (loss * weight if weight != 1.0 else loss).backward()
        return self._stats(self.torch, out, yb, loss)

    def eval_batch(self, x, shape, labels):
        """Loss and accuracy of an eval-mode batch; returns (mean loss, correct, count)."""
        with self.torch.no_grad():
            out, yb, loss = self._forward(x, shape, labels, False)
            return self._stats(self.torch, out, yb, loss)

    def _named_parameters(self):
        """The model's trainable tensors under the graph's names."""
        link = self.mg._link
        return [(n, link.tensor(n)) for n in link.trainable]

    def step(self, kind_json, lr, step, buffers):
        """One optimizer step with the held gradients, then drops them. The first step builds the
        optimizer (`kind_json` is mase-rs's `OptimizerKind`) and, when the run resumes, loads
        `step` and `buffers` (mase-rs's `OptimizerState`)."""
        if self.optimizer is None:
            self.optimizer = self._make_optimizer(json.loads(kind_json), lr)
            if step:
                self._load_state(step, buffers)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1

    def _make_optimizer(self, kind, lr):
        optim = self.torch.optim
        ((name, h),) = kind.items()
        params = [t for _, t in self._named_parameters()]
        if name == "Sgd":
            return optim.SGD(
                params, lr=lr, momentum=h["momentum"], dampening=h["dampening"], weight_decay=h["weight_decay"], nesterov=h["nesterov"]
            )
        cls = {"Adam": optim.Adam, "AdamW": optim.AdamW}[name]
        return cls(params, lr=lr, betas=(h["beta1"], h["beta2"]), eps=h["eps"], weight_decay=h["weight_decay"])

    def _buffer_names(self):
        return ("momentum_buffer",) if isinstance(self.optimizer, self.torch.optim.SGD) else ("exp_avg", "exp_avg_sq")

    def _load_state(self, step, buffers):
        torch = self.torch
        by_name = dict(self._named_parameters())
        names = self._buffer_names()
        for full, data in buffers:
            buf, _, param = full.partition(".")
            if buf not in names or param not in by_name:
                raise ValueError(f"optimizer state entry `{full}`: no such buffer of {type(self.optimizer).__name__} or parameter")
            p = by_name[param]
            state = self.optimizer.state[p]
            state[buf] = torch.from_numpy(np.asarray(data, dtype=np.float32)).view_as(p).to(self.device).clone()
            if buf != "momentum_buffer":
                state["step"] = torch.tensor(float(step))
        self.steps = step

    def optimizer_state(self):
        """(steps taken, [(mase-rs buffer name, float32 array)]) for a checkpoint; None before
        the first step (the state `ch` resumed from, if any, is still the one to save)."""
        if self.optimizer is None:
            return None
        out = []
        names = self._buffer_names()
        for name, p in self._named_parameters():
            state = self.optimizer.state.get(p, {})
            for buf in names:
                if state.get(buf) is not None:
                    out.append((f"{buf}.{name}", state[buf].detach().to("cpu", self.torch.float32).reshape(-1).numpy()))
        return self.steps, out

    def sync(self):
        """Copies the device's weights and buffers into the Rust graph."""
        self.mg._link.to_rust()
