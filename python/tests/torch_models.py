"""The zoo's models written as PyTorch modules, with the zoo's module paths (as
`bench/pytorch_ref.py` writes them), for data of `sample_shape` and `classes` classes."""

import math

import torch.nn as nn

L, BN, R = nn.Linear, nn.BatchNorm1d, nn.ReLU


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
        self.seq_blocks = nn.Sequential(L(f, 8), R(), L(8, 8), R(), L(8, c))

    def forward(self, x):
        return self.seq_blocks(x.view(x.size(0), -1))


class ToyTiny(nn.Module):
    """MASE's `ToyTiny`: `l2` and `relu_2` are registered but never called."""

    def __init__(self, f, c):
        super().__init__()
        self.l1, self.relu_1, self.l2, self.relu_2 = L(f, 2), R(), L(2, c), R()

    def forward(self, x):
        return self.relu_1(self.l1(x.view(x.size(0), -1)))


class Vgg7(nn.Module):
    """MASE's CIFAR VGG7 (BatchNorm2d momentum 0.9)."""

    def __init__(self, ch, classes):
        super().__init__()
        layers = []
        for ci, co, pool in [(ch, 128, 0), (128, 128, 1), (128, 256, 0), (256, 256, 1), (256, 512, 0), (512, 512, 1)]:
            layers += [nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co, momentum=0.9), R()]
            if pool:
                layers.append(nn.MaxPool2d(2))
        self.feature_layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(L(8192, 1024), R(), L(1024, 1024), R())
        self.last_layer = L(1024, classes)

    def forward(self, x):
        return self.last_layer(self.classifier(self.feature_layers(x).view(-1, 8192)))


def build(name, sample_shape, c):
    """The PyTorch module of zoo model `name`."""
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
        conv = [
            nn.Conv2d(ch, 8, 3, padding=1),
            R(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            R(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        ]
        return Seq(conv + [L(16 * (h // 4) * (w // 4), c)])
    if name == "vgg7":
        return Vgg7(sample_shape[0], c)
    raise KeyError(name)
