"""Reads the TensorBoard event files of a `ch train` run with TensorBoard's own loader
(`tensorboard.backend.event_processing.event_accumulator.EventAccumulator`, what
`tensorboard --logdir` uses) and checks the scalars against the run's metrics.json.

Run from the repository root (needs `pip install tensorboard`):
    ch train mlp digits --max-epochs 3 --learning-rate 3e-3 --batch-size 64 \
        --log-every-n-steps 1 --project tbcheck
    python3 scripts/check_tensorboard_logs.py mase_output/tbcheck/software
It prints each tag with its number of points and first/last (step, value), and exits non-zero
when a tag is missing or an epoch's value differs from metrics.json.
"""
import glob
import json
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

EPOCH_TAGS = {
    "train_loss_epoch": "train_loss",
    "train_acc_epoch": "train_acc",
    "val_loss_epoch": "val_loss",
    "val_acc_epoch": "val_acc",
    "epoch": "epoch",
}


def main(software):
    versions = sorted(glob.glob(os.path.join(software, "tensorboard", "lightning_logs", "version_*")))
    if not versions:
        sys.exit(f"no lightning_logs/version_* under {software}/tensorboard")
    acc = EventAccumulator(versions[-1])
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in tags:
        points = acc.Scalars(tag)
        print(f"{tag:18} {len(points):4} points, first ({points[0].step}, {points[0].value:.6g}), last ({points[-1].step}, {points[-1].value:.6g})")
    history = json.load(open(os.path.join(software, "training_ckpts", "metrics.json")))
    lr_tags = [t for t in tags if t.startswith("lr-")]
    missing = [t for t in list(EPOCH_TAGS) + ["train_loss_step", "train_acc_step"] if t not in tags]
    if missing or len(lr_tags) != 1:
        sys.exit(f"missing tags: {missing} (learning-rate tags: {lr_tags})")
    pairs = dict(EPOCH_TAGS, **{lr_tags[0]: "lr"})
    # The last version holds the epochs of the last run (all of them unless it was resumed).
    first_epoch = int(acc.Scalars("epoch")[0].value)
    for tag, key in pairs.items():
        got = [p.value for p in acc.Scalars(tag)]
        want = [r[key] for r in history[first_epoch:]]
        if len(got) != len(want) or any(not math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12) for g, w in zip(got, want)):
            sys.exit(f"{tag}: {got} but metrics.json has {want}")
    print(f"OK: {len(tags)} tags, epochs {first_epoch}..{len(history) - 1} match metrics.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
