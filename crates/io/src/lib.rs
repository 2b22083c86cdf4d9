//! Data sets and checkpoints of mase-rs.
//!
//! Data sets are loaded by name from a data folder ([`data_dir`]) into three in-memory splits
//! ([`Splits`]); each has its own module, which documents the files it reads and how it splits them.
//! Checkpoints ([`Checkpoint`]) are single safetensors files holding a model's graph, parameters,
//! optimizer state and training metadata.

mod checkpoint;
mod cifar10;
mod dataset;
mod digits;
mod error;
mod files;
mod jsc;
mod mnist;
mod nonfinite;
mod numpy_random;
pub mod parse;
mod registry;
mod standardize;
mod tabular;
mod toy;

pub use checkpoint::{describe_file, load_checkpoint, save_checkpoint, sniff_file, Checkpoint, FileKind, CHECKPOINT_FORMAT};
pub use cifar10::{augment_cifar, CLASS_NAMES as CIFAR10_CLASSES};
pub use dataset::{batch_order, Dataset, DatasetInfo, Splits};
pub use digits::DIGITS_SEQ_VOCAB;
pub use error::{IoError, Result};
pub use jsc::{
    jsc_split_indices, preprocess_jsc, read_jsc_table, unique_rows, JscSplitIndices, JscTable, JSC_FEATURES, JSC_LABELS, MASE_CACHE_NAME,
};
pub use nonfinite::NonFinite;
pub use numpy_random::RandomState;
pub use registry::{data_dir, dataset_names, load_dataset, DataOptions, DATA_DIR_ENV};
pub use standardize::Standardizer;
pub use toy::{toy_tiny_split, TOY_TINY_SAMPLES};
