"""PyTorch eager side of mase-rs's benchmark: the same models, data shapes and protocol as
`mase-bench` (crates/bench), printing one JSON line per case with the same keys.

usage: pytorch_ref.py [--threads N] [--models a,b,...] [--steps N] [--vgg-steps N] [--bert-steps N] [--rows N]

Protocol (identical in crates/bench/src/protocol.rs):
- a training step is zero_grad, forward, cross-entropy, backward, Adam(lr=1e-3) step, in train mode;
- tabular and MNIST models: batch 256 over a seeded synthetic data set of `--rows` rows, cycled in
  order; 10 warm-up steps, then `--steps` timed steps; then `--steps` timed eval batches
  (eval mode, torch.no_grad());
- vgg7: one fixed CIFAR-shaped batch of 32 and one of 128; one warm-up step, then `--vgg-steps`
  timed steps and as many timed eval batches;
- resnet18 (CIFAR stem) and vit-tiny: one fixed CIFAR-shaped batch of 64, as vgg7's;
- bert-tiny-mx: bert-tiny (64 tokens, 10 classes) with MXINT8 fake quantization (blocks of 32)
  on the input, weight and bias of every linear, batches of 64 sequences; two warm-up steps,
  then `--bert-steps` timed steps and as many timed eval batches;
- the figures are medians: train_step_us, eval_batch_us, and samples/s = batch / median.

The models copy the layer lists of mase-rs's zoo (crates/zoo), with the same module paths;
`zoo_module` builds any zoo model, and python/tests trace them against the zoo's graphs.
"""
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ALL_MODELS = ["jsc-tiny", "jsc-toy", "jsc-toy-q", "jsc-three-layer", "tfc", "vgg7", "resnet18", "vit-tiny", "bert-tiny-mx"]


def arg(name, default):
    a = sys.argv
    return type(default)(a[a.index(name) + 1]) if name in a else default


def integer_quantizer(x, width, frac):
    """MASE's `integer_quantizer` forward: round to a multiple of 2^-frac (half the width when
    `frac` is None), clamp to `width` signed bits."""
    frac = width // 2 if frac is None else frac
    s = 2.0**frac
    return torch.clamp(torch.round(x * s), -(2 ** (width - 1)), 2 ** (width - 1) - 1) / s


def ste_q(x, width=8, frac=4):
    """Integer fixed-point fake quantization with a straight-through estimator (MASE's
    `integer_quantizer`)."""
    return x + (integer_quantizer(x, width, frac) - x).detach()


class LinearInteger(nn.Linear):
    """MASE's `LinearInteger`: a copy of `linear` whose input, weight and bias are fake-quantized
    in forward to the `integer` formats of `cfg` (`data_in_width`, `data_in_frac_width`, ...)."""

    def __init__(self, linear, cfg):
        super().__init__(linear.in_features, linear.out_features, linear.bias is not None)
        self.load_state_dict(linear.state_dict())
        self.cfg = cfg

    def forward(self, x):
        c = self.cfg
        x = integer_quantizer(x, c["data_in_width"], c["data_in_frac_width"])
        w = integer_quantizer(self.weight, c["weight_width"], c["weight_frac_width"])
        b = integer_quantizer(self.bias, c["bias_width"], c["bias_frac_width"])
        return F.linear(x, w, b)


class QLinear(nn.Linear):
    """A linear layer with 8/4 fake quantization on its input, weight and bias (jsc-toy-q)."""

    def forward(self, x):
        return F.linear(ste_q(x), ste_q(self.weight), ste_q(self.bias))


def mxint_quantizer(x, width=8, block_size=32):
    """OCP MXINT fake quantization along the last axis, vectorised as MASE's `mxint_quantizer`
    is (one torch op after another): blocks of `block_size` values share the scale
    `X = 2^clamp(floor(log2 max|x|), -127, 127)`; each value is
    `clamp(round(x / X * 2^(w-2)), ±(2^(w-1) - 1)) / 2^(w-2) * X` (crates/quant/src/mxint.rs).
    The last block of the axis may be shorter (the classifier's bias of 10): it is padded with
    zeros, which leave its maximum as it is."""
    shape, n = x.shape, x.shape[-1]
    pad = (-n) % block_size
    xp = F.pad(x, (0, pad)) if pad else x
    xb = xp.reshape(*shape[:-1], (n + pad) // block_size, block_size)
    amax = xb.abs().amax(-1, keepdim=True)
    _, e = torch.frexp(amax)
    e = torch.where(amax == 0, torch.full_like(e, -127), (e - 1).clamp(-127, 127)).to(x.dtype)
    scale = torch.exp2(e)
    up, hi = float(2 ** (width - 2)), float(2 ** (width - 1) - 1)
    q = torch.clamp(torch.round(xb / scale * up), -hi, hi) / up * scale
    return q.reshape(xp.shape)[..., :n] if pad else q.reshape(shape)


def ste_mx(x):
    """MXINT8 fake quantization with a straight-through estimator."""
    return x + (mxint_quantizer(x) - x).detach()


class MxLinear(nn.Linear):
    """A linear layer with MXINT8 fake quantization (blocks of 32 along the last axis) on its
    input, weight and bias (bert-tiny-mx)."""

    def forward(self, x):
        return F.linear(ste_mx(x), ste_mx(self.weight), ste_mx(self.bias))


class Seq(nn.Module):
    """`x -> seq_blocks(x)`: every jsc model, mlp, tfc and mnist-cnn."""

    def __init__(self, layers):
        super().__init__()
        self.seq_blocks = nn.Sequential(*layers)

    def forward(self, x):
        return self.seq_blocks(x)


class Toy(nn.Module):
    """MASE's `ToyNet`: `seq_blocks(x.view(x.size(0), -1))`."""

    def __init__(self, f, c):
        super().__init__()
        L, R = nn.Linear, nn.ReLU
        self.seq_blocks = nn.Sequential(L(f, 8), R(), L(8, 8), R(), L(8, c))

    def forward(self, x):
        return self.seq_blocks(x.view(x.size(0), -1))


class ToyTiny(nn.Module):
    """MASE's `ToyTiny`: `l2` and `relu_2` are registered but never called."""

    def __init__(self, f, c):
        super().__init__()
        self.l1, self.relu_1, self.l2, self.relu_2 = nn.Linear(f, 2), nn.ReLU(), nn.Linear(2, c), nn.ReLU()

    def forward(self, x):
        return self.relu_1(self.l1(x.view(x.size(0), -1)))


class Vgg7(nn.Module):
    """MASE's CIFAR VGG7 as in crates/zoo/src/vision.rs (BatchNorm2d momentum 0.9)."""

    def __init__(self, ch, classes):
        super().__init__()
        layers = []
        for ci, co, pool in [(ch, 128, 0), (128, 128, 1), (128, 256, 0), (256, 256, 1), (256, 512, 0), (512, 512, 1)]:
            layers += [nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co, momentum=0.9), nn.ReLU()]
            if pool:
                layers.append(nn.MaxPool2d(2))
        self.feature_layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(8192, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU())
        self.last_layer = nn.Linear(1024, classes)

    def forward(self, x):
        return self.last_layer(self.classifier(self.feature_layers(x).view(-1, 8192)))


class BertEmbeddings(nn.Module):
    """HuggingFace's `BertEmbeddings` without dropout: word, token-type (all 0) and position
    embeddings summed, then LayerNorm; `position_ids` and `token_type_ids` are buffers."""

    def __init__(self, vocab, hidden, max_positions, eps):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        self.register_buffer("position_ids", torch.arange(max_positions).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, max_positions), dtype=torch.long))

    def forward(self, ids):
        e = self.word_embeddings(ids) + self.token_type_embeddings(self.token_type_ids)
        return self.LayerNorm(e + self.position_embeddings(self.position_ids))


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def forward(self, h):
        b, n, d = h.shape

        def split(x):
            return x.view(b, n, self.heads, d // self.heads).permute(0, 2, 1, 3)

        a = F.scaled_dot_product_attention(split(self.query(h)), split(self.key(h)), split(self.value(h)))
        return a.permute(0, 2, 1, 3).reshape(b, n, d)


class BertDenseNorm(nn.Module):
    """`BertSelfOutput` / `BertOutput`: dense, residual, LayerNorm (post-norm)."""

    def __init__(self, i, o, eps):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(i, o), nn.LayerNorm(o, eps=eps)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, hidden, heads, eps):
        super().__init__()
        self.self = BertSelfAttention(hidden, heads)
        self.output = BertDenseNorm(hidden, hidden, eps)

    def forward(self, h):
        return self.output(self.self(h), h)


class BertIntermediate(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.dense = nn.Linear(hidden, inter)

    def forward(self, h):
        return F.gelu(self.dense(h))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter, eps):
        super().__init__()
        self.attention = BertAttention(hidden, heads, eps)
        self.intermediate = BertIntermediate(hidden, inter)
        self.output = BertDenseNorm(inter, hidden, eps)

    def forward(self, h):
        a = self.attention(h)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, layers, *args):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(*args) for _ in range(layers)])

    def forward(self, h):
        for layer in self.layer:
            h = layer(h)
        return h


class BertPooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))


class BertModel(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, inter, max_positions, eps):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_positions, eps)
        self.encoder = BertEncoder(layers, hidden, heads, inter, eps)
        self.pooler = BertPooler(hidden)

    def forward(self, ids):
        return self.pooler(self.encoder(self.embeddings(ids)))


class BertTiny(nn.Module):
    """The zoo's bert-tiny (crates/zoo/src/text.rs): HuggingFace's `BertForSequenceClassification`
    with hidden 128, 2 layers, 2 heads, intermediate 512, exact GELU, LayerNorm eps 1e-12, no
    dropout, as plain modules with BERT's module paths. Takes float (whole-number) or integer ids."""

    def __init__(self, seq_len, classes, vocab=17, linear=nn.Linear):
        super().__init__()
        self.bert = BertModel(vocab, 128, 2, 2, 512, seq_len, 1e-12)
        self.classifier = nn.Linear(128, classes)
        if linear is not nn.Linear:
            # Every nn.Linear becomes `linear` with the same weights (MxLinear for bert-tiny-mx).
            for path, m in list(self.named_modules()):
                if type(m) is nn.Linear:
                    owner, _, attr = path.rpartition(".")
                    q = linear(m.in_features, m.out_features)
                    q.load_state_dict(m.state_dict())
                    setattr(self.get_submodule(owner) if owner else self, attr, q)

    def forward(self, ids):
        return self.classifier(self.bert(ids.long()))


class BasicBlock(nn.Module):
    """torchvision's ResNet `BasicBlock` (crates/zoo/src/resnet.rs)."""

    def __init__(self, i, o, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(i, o, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(o)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(o)
        self.downsample = None
        if stride != 1 or i != o:
            self.downsample = nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o))

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        identity = x if self.downsample is None else self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    """torchvision's resnet18 with the CIFAR stem (3x3 conv1 of stride 1, no max pool), as
    crates/zoo/src/resnet.rs; the same module paths as torchvision's."""

    def __init__(self, ch, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        width = 64
        for k, o in enumerate([64, 128, 256, 512]):
            stride = 1 if k == 0 else 2
            setattr(self, f"layer{k + 1}", nn.Sequential(BasicBlock(width, o, stride), BasicBlock(o, o, 1)))
            width = o
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class EncoderBlock(nn.Module):
    """torchvision's ViT `EncoderBlock`: pre-norm attention and MLP, each with a residual."""

    def __init__(self, hidden, heads, mlp):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(), nn.Dropout(0.0), nn.Linear(mlp, hidden), nn.Dropout(0.0))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = self.dropout(y) + x
        return x + self.mlp(self.ln_2(x))


class VitTiny(nn.Module):
    """torchvision's `VisionTransformer` at the zoo's vit-tiny size (crates/zoo/src/vit.rs):
    hidden 192, 6 blocks of 3 heads, MLP 768, patches of 4 (7 on sides that are multiples of 7)."""

    def __init__(self, ch, side, classes, hidden=192, layers=6, heads=3, mlp=768):
        super().__init__()
        self.patch, self.hidden = (7 if side % 7 == 0 else 4), hidden
        tokens = (side // self.patch) ** 2
        self.conv_proj = nn.Conv2d(ch, hidden, self.patch, self.patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.encoder = nn.Module()
        self.encoder.pos_embedding = nn.Parameter(torch.empty(1, tokens + 1, hidden).normal_(std=0.02))
        self.encoder.dropout = nn.Dropout(0.0)
        self.encoder.layers = nn.Sequential()
        for i in range(layers):
            self.encoder.layers.add_module(f"encoder_layer_{i}", EncoderBlock(hidden, heads, mlp))
        self.encoder.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(hidden, classes))

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.hidden, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        e = self.encoder
        x = e.ln(e.layers(e.dropout(x + e.pos_embedding)))
        return self.heads(x[:, 0])


def zoo_module(name, sample_shape, c, linear=nn.Linear):
    """The PyTorch module of zoo model `name` for data of `sample_shape` and `c` classes, with the
    zoo's module paths; `linear` builds the jsc models' linear layers (`QLinear` for jsc-toy-q)."""
    L, BN, R = linear, nn.BatchNorm1d, nn.ReLU
    f = math.prod(sample_shape)
    if name == "jsc-tiny":
        return Seq([BN(f), R(), L(f, c), R()])
    if name == "jsc-toy":
        return Seq([BN(f), R(), L(f, 8), BN(8), R(), L(8, 8), BN(8), R(), L(8, c), BN(c), R()])
    if name == "jsc-s":
        return Seq([BN(f), R(), L(f, 64), BN(64), R(), L(64, 32), R(), L(32, 32), R(), L(32, 32), R(), L(32, c), BN(c), R()])
    if name == "jsc-three-linear":
        return Seq([BN(f), R(), L(f, 16), R(), L(16, 16), R(), L(16, c), R()])
    if name == "jsc-three-layer":
        return Seq([L(f, 64), R(), L(64, 32), R(), L(32, 32), R(), L(32, c)])
    if name == "toy":
        return Toy(f, c)
    if name == "toy_tiny":
        return ToyTiny(f, c)
    if name == "mlp":
        return Seq([nn.Flatten(), L(f, 64), R(), L(64, c)])
    if name == "tfc":
        return Seq([nn.Flatten(), L(f, 64), BN(64), R(), L(64, 64), BN(64), R(), L(64, 64), BN(64), R(), L(64, c)])
    if name == "mnist-cnn":
        ch, h, w = sample_shape
        conv = [nn.Conv2d(ch, 8, 3, padding=1), R(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), R(), nn.MaxPool2d(2)]
        return Seq(conv + [nn.Flatten(), L(16 * (h // 4) * (w // 4), c)])
    if name == "vgg7":
        return Vgg7(sample_shape[0], c)
    if name == "bert-tiny":
        return BertTiny(sample_shape[0], c)
    if name == "resnet18":
        return ResNet18(sample_shape[0], c)
    if name == "vit-tiny":
        return VitTiny(sample_shape[0], sample_shape[1], c)
    raise KeyError(name)


def build(name):
    """The benchmark's model `name`: a zoo module with the benchmark's data shapes."""
    if name in ("jsc-tiny", "jsc-toy", "jsc-three-layer"):
        return zoo_module(name, (16,), 5)
    if name == "jsc-toy-q":
        return zoo_module("jsc-toy", (16,), 5, linear=QLinear)
    if name == "tfc":
        return zoo_module(name, (1, 28, 28), 10)
    if name in ("vgg7", "resnet18", "vit-tiny"):
        return zoo_module(name, (3, 32, 32), 10)
    if name == "bert-tiny-mx":
        return BertTiny(64, 10, linear=MxLinear)
    raise SystemExit(f"unknown model {name}; known: {', '.join(ALL_MODELS)}")


def jsc_dataset(n, seed=7):
    """Seeded synthetic jet-shaped rows: 16 features, labels from a random projection."""
    r = np.random.default_rng(seed)
    proj = r.standard_normal((16, 5)).astype(np.float32)
    z = r.standard_normal((n, 16)).astype(np.float32)
    x = z * (0.5 + np.arange(16, dtype=np.float32) * 0.3) + (np.arange(16, dtype=np.float32) - 8.0) * 0.7
    return torch.from_numpy(x), torch.from_numpy((z @ proj).argmax(1).astype(np.int64))


def mnist_dataset(n, seed=7):
    """MNIST-shaped rows: [n, 1, 28, 28] pixels in [0, 1], labels 0..9."""
    r = np.random.default_rng(seed)
    x = r.random((n, 1, 28, 28), dtype=np.float32)
    return torch.from_numpy(x), torch.from_numpy(r.integers(0, 10, n).astype(np.int64))


def median(v):
    return float(np.median(v))


def report(name, model, batch, threads, ts, es, loss):
    t, e = median(ts), median(es)
    print(json.dumps({
        "framework": "torch", "torch": torch.__version__, "model": name, "batch": batch, "threads": threads,
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "train_step_us": t, "eval_batch_us": e,
        "train_samples_per_s": batch / t * 1e6, "eval_samples_per_s": batch / e * 1e6,
        "final_loss": loss,
    }), flush=True)


def run_case(name, x, y, batch, warmup, steps, threads):
    torch.manual_seed(42)
    m = build(name)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    nb = x.shape[0] // batch

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(xb), yb)
        loss.backward()
        opt.step()
        return loss

    def rows(s):
        b = s % nb
        return x[b * batch:(b + 1) * batch], y[b * batch:(b + 1) * batch]

    m.train()
    for s in range(warmup):
        step(*rows(s))
    ts, loss = [], torch.tensor(float("nan"))
    for s in range(steps):
        xb, yb = rows(warmup + s)
        t = time.perf_counter()
        loss = step(xb, yb)
        ts.append((time.perf_counter() - t) * 1e6)
    m.eval()
    es = []
    with torch.no_grad():
        for s in range(steps):
            xb, _ = rows(s)
            t = time.perf_counter()
            m(xb)
            es.append((time.perf_counter() - t) * 1e6)
    report(name, m, batch, threads, ts, es, float(loss.detach()))


def main():
    threads = arg("--threads", 1)
    steps, vgg_steps, rows = arg("--steps", 500), arg("--vgg-steps", 3), arg("--rows", 65536)
    bert_steps = arg("--bert-steps", 20)
    models = arg("--models", ",".join(ALL_MODELS)).split(",")
    torch.set_num_threads(threads)
    for name in models:
        if name in ("jsc-tiny", "jsc-toy", "jsc-toy-q", "jsc-three-layer"):
            x, y = jsc_dataset(rows)
            run_case(name, x, y, 256, 10, steps, threads)
        elif name == "tfc":
            x, y = mnist_dataset(rows // 8)
            run_case(name, x, y, 256, 10, steps, threads)
        elif name == "vgg7":
            for batch in (32, 128):
                g = torch.Generator().manual_seed(1)
                x = torch.randn(batch, 3, 32, 32, generator=g)
                y = torch.randint(0, 10, (batch,), generator=g)
                run_case(name, x, y, batch, 1, vgg_steps, threads)
        elif name == "bert-tiny-mx":
            # 4 batches of 64 sequences of 64 token ids 0..16 (float, as the Rust side feeds them).
            r = np.random.default_rng(7)
            x = torch.from_numpy(r.integers(0, 17, (256, 64)).astype(np.float32))
            y = torch.from_numpy(r.integers(0, 10, 256).astype(np.int64))
            run_case(name, x, y, 64, 2, bert_steps, threads)
        elif name in ("resnet18", "vit-tiny"):
            g = torch.Generator().manual_seed(1)
            x = torch.randn(64, 3, 32, 32, generator=g)
            y = torch.randint(0, 10, (64,), generator=g)
            run_case(name, x, y, 64, 1, vgg_steps, threads)
        else:
            build(name)


if __name__ == "__main__":
    main()
