"""Writes crates/cli/tests/fixtures/tensorboard/reference.tfevents with TensorBoard's own event
writer (`tensorboard.summary.writer.event_file_writer.EventFileWriter`, the writer under
`torch.utils.tensorboard.SummaryWriter`), so that the Rust tests check `ch train`'s event files
against the real format without Python.

The events are the scalars listed in EVENTS below, each an `Event` with a `Summary` of
`simple_value`s as `SummaryWriter.add_scalar` makes them (one value per event), plus one event
with two values in one summary (the grouping `ch train` uses). Wall times are fixed (time.time
is replaced while writing) so rerunning the script gives the same bytes; the file-version
record also carries the writer's `source_metadata`, which readers must skip.

Run from the repository root: python3 scripts/make_tfevents_fixture.py
(needs `pip install tensorboard`; made with tensorboard 2.21.0 and protobuf 7.36.2).
"""
import glob
import os
import pathlib
import shutil
import tempfile
import time
from unittest import mock

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "crates/cli/tests/fixtures/tensorboard/reference.tfevents"

# (wall_time, step, [(tag, value), ...]); step 0 is left out of the encoding (proto3's
# default), 300 needs a two-byte varint, and the values cover zero, negatives, the largest
# float32 and NaN.
EVENTS = [
    (1700000001.25, 0, [("train_loss_step", 2.3125)]),
    (1700000002.5, 1, [("train_loss_step", 1.5)]),
    (1700000003.75, 300, [("train_loss_step", 0.0)]),
    (1700000004.0, 301, [("val_acc_epoch", -1.25)]),
    (1700000005.0, 302, [("lr-Adam", 3.4028234663852886e38)]),
    (1700000006.0, 303, [("train_loss_step", float("nan"))]),
    (1700000007.0, 304, [("val_loss_epoch", 0.5), ("epoch", 3.0)]),
]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        with mock.patch("time.time", return_value=1700000000.0):
            writer = EventFileWriter(tmp)
        for wall_time, step, values in EVENTS:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values]
            )
            writer.add_event(event_pb2.Event(wall_time=wall_time, step=step, summary=summary))
        writer.close()
        (path,) = glob.glob(os.path.join(tmp, "events.out.tfevents.*"))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
