"""Writes a small CIFAR-10-format data set into
crates/io/tests/fixtures/cifar10/cifar-10-batches-bin/ (the layout of the official "binary
version" archive): data_batch_1.bin .. data_batch_5.bin with 32 records each and test_batch.bin
with 40, so that `ch train vgg7 cifar10 --data-dir crates/io/tests/fixtures` and the tests run
on real files in the real format.

Every record is the one real CIFAR-format image shipped in the same folder (bnn_pynq_deer.bin,
Xilinx BNN-PYNQ, BSD-3-Clause; see crates/io/tests/fixtures/README.md), perturbed: a random shift of up to
4 pixels (edges repeated), a random horizontal flip, a class-dependent colour tint and Gaussian
noise. The label of record k is k % 10 and the tint depends on it, so a model can learn the
classes. The draws come from numpy's RandomState(2024), so the files are the same on every run.

Run: /work/pyenv/bin/python scripts/make_cifar_fixture.py
"""
import hashlib
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates/io/tests/fixtures/cifar10"
OUT = FIXTURES / "cifar-10-batches-bin"
SIDE = 32
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
PER_TRAIN_FILE = 32
TEST_RECORDS = 40

# One (R, G, B) offset per class, distinct enough to be learnable after the noise.
TINTS = np.array(
    [
        [40, -20, -20],
        [-20, 40, -20],
        [-20, -20, 40],
        [40, 40, -30],
        [40, -30, 40],
        [-30, 40, 40],
        [30, 30, 30],
        [-30, -30, -30],
        [50, 0, -50],
        [-50, 0, 50],
    ],
    dtype=np.int32,
)


def perturbed(deer: np.ndarray, label: int, rng: np.random.RandomState) -> np.ndarray:
    """One record's image: shift, flip, tint and noise of the deer, as uint8 [3, 32, 32]."""
    dy, dx = rng.randint(-4, 5, size=2)
    img = np.roll(deer, shift=(dy, dx), axis=(1, 2))
    # Repeat the edge rows/columns the roll wrapped around, rather than wrapping content.
    if dy > 0:
        img[:, :dy, :] = img[:, dy : dy + 1, :]
    elif dy < 0:
        img[:, dy:, :] = img[:, dy - 1 : dy, :]
    if dx > 0:
        img[:, :, :dx] = img[:, :, dx : dx + 1]
    elif dx < 0:
        img[:, :, dx:] = img[:, :, dx - 1 : dx]
    if rng.rand() < 0.5:
        img = img[:, :, ::-1]
    noise = rng.normal(0.0, 8.0, size=img.shape)
    out = img.astype(np.float64) + TINTS[label][:, None, None] + noise
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def main() -> None:
    raw = (FIXTURES / "bnn_pynq_deer.bin").read_bytes()
    assert len(raw) == 1 + 3 * SIDE * SIDE, "the deer record is one CIFAR-10 record"
    deer = np.frombuffer(raw[1:], dtype=np.uint8).reshape(3, SIDE, SIDE).copy()
    rng = np.random.RandomState(2024)
    OUT.mkdir(parents=True, exist_ok=True)
    k = 0
    for name, count in [(f, PER_TRAIN_FILE) for f in TRAIN_FILES] + [("test_batch.bin", TEST_RECORDS)]:
        records = bytearray()
        for _ in range(count):
            label = k % 10
            records.append(label)
            records += perturbed(deer, label, rng).tobytes()
            k += 1
        (OUT / name).write_bytes(bytes(records))
        print(f"{name}: {count} records, sha256 {hashlib.sha256(records).hexdigest()}")


if __name__ == "__main__":
    main()
