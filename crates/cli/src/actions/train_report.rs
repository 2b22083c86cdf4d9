//! What `ch train` writes for people to look at besides the table: TensorBoard event files
//! (MASE's default logger, `--report-to tensorboard`) and `curves.png`/`curves.svg`.
//!
//! The event files follow Lightning's `TensorBoardLogger(save_dir=software/tensorboard)`:
//! one `lightning_logs/version_N` folder per run, with MASE's tags (`train_loss_step`,
//! `train_acc_step`, `val_loss_epoch`, `val_acc_epoch`, the `LearningRateMonitor`'s
//! `lr-Adam`, and `epoch`) plus `train_loss_epoch`/`train_acc_epoch`. Nothing here touches
//! the weights or a random stream, so reporting never changes what is trained.

use super::epoch::EpochRecord;
use crate::config::OptimizerName;
use crate::tfevents::EventFile;
use anyhow::{Context, Result};
use mase_search::plot::{plot_panels, Panel, Series};
use std::path::{Path, PathBuf};

/// An open TensorBoard log of one run.
pub struct TensorBoardLog {
    file: EventFile,
    lr_tag: String,
}

/// Lightning's next version folder: one more than the largest `version_N` present, else 0.
fn next_version(dir: &Path) -> usize {
    let taken = std::fs::read_dir(dir).into_iter().flatten().flatten().filter_map(|e| {
        let name = e.file_name();
        name.to_str()?.strip_prefix("version_")?.parse::<usize>().ok()
    });
    taken.max().map_or(0, |v| v + 1)
}

/// Opens a new event file in `<software>/tensorboard/lightning_logs/version_N/`.
pub fn open_tensorboard(software: &Path, optimizer: OptimizerName) -> Result<TensorBoardLog> {
    let logs = software.join("tensorboard").join("lightning_logs");
    let dir = logs.join(format!("version_{}", next_version(&logs)));
    let file = EventFile::create(&dir).with_context(|| format!("cannot write TensorBoard events in {}", dir.display()))?;
    // Lightning's LearningRateMonitor names the tag after the optimizer class.
    let class = match optimizer {
        OptimizerName::Adam => "Adam",
        OptimizerName::AdamW => "AdamW",
        OptimizerName::Sgd => "SGD",
    };
    Ok(TensorBoardLog { file, lr_tag: format!("lr-{class}") })
}

impl TensorBoardLog {
    pub fn dir(&self) -> PathBuf {
        self.file.path().parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The loss and accuracy of optimizer step `step` (0-based, as Lightning's x axis).
    pub fn step(&mut self, step: u64, loss: f64, acc: f64) -> Result<()> {
        let values = [("train_loss_step", loss as f32), ("train_acc_step", acc as f32)];
        self.file.scalars(step as i64, &values).with_context(|| format!("cannot write {}", self.file.path().display()))
    }

    /// An epoch's scalars at `step`, the number of optimizer steps taken so far, and flushes
    /// them to disk so that `tensorboard --logdir` shows a running job.
    pub fn epoch(&mut self, step: u64, r: &EpochRecord) -> Result<()> {
        let values = [
            ("train_loss_epoch", r.train_loss as f32),
            ("train_acc_epoch", r.train_acc as f32),
            ("val_loss_epoch", r.val_loss as f32),
            ("val_acc_epoch", r.val_acc as f32),
            (self.lr_tag.as_str(), r.lr as f32),
            ("epoch", r.epoch as f32),
        ];
        let path = self.file.path().to_path_buf();
        self.file.scalars(step as i64, &values).and_then(|()| self.file.flush()).with_context(|| format!("cannot write {}", path.display()))
    }

    pub fn flush(&mut self) -> Result<()> {
        let path = self.file.path().to_path_buf();
        self.file.flush().with_context(|| format!("cannot write {}", path.display()))
    }
}

/// Writes `<dir>/curves.png` and `<dir>/curves.svg`: train and validation loss, train and
/// validation accuracy, and the learning rate, per epoch.
pub fn write_curves(dir: &Path, label: &str, history: &[EpochRecord]) -> Result<Vec<PathBuf>> {
    let series = |name: &str, pick: fn(&EpochRecord) -> f64| Series {
        label: name.to_string(),
        points: history.iter().map(|r| (r.epoch as f64, pick(r))).collect(),
    };
    let loss = [series("train_loss", |r| r.train_loss), series("val_loss", |r| r.val_loss)];
    let acc = [series("train_acc", |r| r.train_acc), series("val_acc", |r| r.val_acc)];
    let lr = [series("lr", |r| r.lr)];
    let panels = [
        Panel { title: "loss", x_label: "epoch", y_label: "cross-entropy", series: &loss },
        Panel { title: "accuracy", x_label: "epoch", y_label: "accuracy", series: &acc },
        Panel { title: "learning rate", x_label: "epoch", y_label: "learning rate", series: &lr },
    ];
    Ok(plot_panels(&dir.join("curves"), &format!("training of {label}"), &panels)?)
}
