//! The record of one training epoch, which the training loop writes and the divergence watch
//! and the training reports read.

use serde::{Deserialize, Serialize};

/// One row of the per-epoch table and of `metrics.csv`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub train_loss: f64,
    pub train_acc: f64,
    pub val_loss: f64,
    pub val_acc: f64,
    pub lr: f64,
    pub seconds: f64,
}
