//! Data set names, the data folder, and loading by name.

use crate::dataset::Splits;
use crate::{cifar10, digits, jsc, mnist, tabular, toy, IoError, NonFinite, Result};
use std::path::PathBuf;

/// Where data sets are read from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataOptions {
    /// The data folder (`--data-dir`); `None` means the default of [`data_dir`].
    pub data_dir: Option<PathBuf>,
    /// What to do with rows whose features are NaN or infinite (refuse them by default).
    pub nonfinite: NonFinite,
}

/// The environment variable naming the data folder.
pub const DATA_DIR_ENV: &str = "MASE_DATA_DIR";

/// Names accepted by [`load_dataset`], in the order `ch` lists them.
const NAMES: [&str; 9] = ["toy_tiny", "jsc", "mnist", "digits", "digits-seq", "cifar10", "iris", "wine", "breast_cancer"];

/// The known data set names.
pub fn dataset_names() -> &'static [&'static str] {
    &NAMES
}

/// Resolves the data folder: `opts.data_dir`, else the environment variable `MASE_DATA_DIR` (when
/// set and not empty), else the repository's `data/` folder, found from this crate's source
/// location so that a built clone finds the data it ships.
pub fn data_dir(opts: &DataOptions) -> PathBuf {
    if let Some(d) = &opts.data_dir {
        return d.clone();
    }
    match std::env::var_os(DATA_DIR_ENV) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data")),
    }
}

/// Loads the data set `name` (case-insensitive) with its train, validation and test splits.
pub fn load_dataset(name: &str, opts: &DataOptions) -> Result<Splits> {
    let name = name.trim().to_lowercase();
    let root = data_dir(opts);
    match name.as_str() {
        "toy_tiny" => Ok(toy::load()),
        "jsc" => jsc::load(&root.join("jsc"), opts.nonfinite),
        "mnist" => mnist::load(&root.join("mnist")),
        "digits" => digits::load(&root.join("digits"), opts.nonfinite),
        "digits-seq" => digits::load_seq(&root.join("digits"), opts.nonfinite),
        "cifar10" => cifar10::load(&root.join("cifar10")),
        "iris" | "wine" | "breast_cancer" => tabular::load(&name, &root.join("tabular"), opts.nonfinite),
        _ => Err(IoError::UnknownDataset { name, known: NAMES.iter().map(|s| s.to_string()).collect() }),
    }
}
