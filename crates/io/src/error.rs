//! The error type of mase-io. Every variant names the file, folder or data set at fault, so that the
//! CLI can print it as one line that tells the user what to fix.

use mase_ir::IrError;
use std::path::PathBuf;
use thiserror::Error;

/// Errors of the io crate.
#[derive(Debug, Error)]
pub enum IoError {
    /// The data set name is not one mase-rs knows.
    #[error("unknown data set `{name}`; known data sets: {}", .known.join(", "))]
    UnknownDataset { name: String, known: Vec<String> },

    /// The files of a data set are not in the data folder.
    #[error(
        "data set `{dataset}`: no usable data in {}: expected {}; put the files there, or point \
         --data-dir DIR (or the environment variable MASE_DATA_DIR=DIR) at a folder that holds `{}/`",
        .dir.display(), .expected.join(" or "), folder_name(.dir)
    )]
    MissingData { dataset: String, dir: PathBuf, expected: Vec<String> },

    /// A file could not be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },

    /// A file could not be written.
    #[error("{}: cannot write: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },

    /// A file is not in the format it should be (bad magic number, wrong size, bad gzip stream).
    #[error("{}: {reason}", .path.display())]
    Format { path: PathBuf, reason: String },

    /// A line of a text file (CSV, ARFF) could not be parsed.
    #[error("{}, line {line}: {reason}", .path.display())]
    Parse { path: PathBuf, line: usize, reason: String },

    /// A feature of a data set is NaN or infinite (see `NonFinite`).
    #[error(
        "{}, {row}, column `{column}`: {value} is not a finite number; fix the data, or pass --drop-nonfinite \
         (TOML drop_nonfinite = true) to leave out the rows that have such values",
        .path.display()
    )]
    NonFinite { path: PathBuf, row: String, column: String, value: f64 },

    /// A file's bytes could not be decoded (a gzip stream, UTF-8 text); the decoder's error
    /// stays the source.
    #[error("{}: {what}: {source}", .path.display())]
    Decode {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An HDF5 file lacks what MASE's jet table needs.
    #[error("{}: HDF5: {reason}", .path.display())]
    Hdf5 { path: PathBuf, reason: String },

    /// The HDF5 reader failed (`what` is empty or says what it was reading); its error stays the
    /// source.
    #[error("{}: HDF5: {}{source}", .path.display(), prefix(.what))]
    Hdf5Read {
        path: PathBuf,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A checkpoint file is damaged, of another format, or incomplete.
    #[error("checkpoint {}: {reason}", .path.display())]
    Checkpoint { path: PathBuf, reason: String },

    /// A checkpoint could not be encoded or decoded: the safetensors container, the JSON of its
    /// metadata or a tensor was rejected, and that error stays the source.
    #[error("checkpoint {}: {what}: {source}", .path.display())]
    CheckpointPart {
        path: PathBuf,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A checkpoint's graph and tensors do not fit together.
    #[error("checkpoint {}: {source}", .path.display())]
    CheckpointGraph {
        path: PathBuf,
        #[source]
        source: IrError,
    },
}

/// `what: ` for a non-empty `what`.
fn prefix(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    }
}

/// The last component of a data set folder (`mnist`, `tabular`), for messages.
fn folder_name(dir: &std::path::Path) -> String {
    dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Result with [`IoError`].
pub type Result<T, E = IoError> = std::result::Result<T, E>;
