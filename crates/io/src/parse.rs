//! The readers of mase-io on bytes already in memory, as its loaders use them once a file is
//! read: for the fuzz targets (`fuzz/` at the repository's root), the regression tests of what
//! they found, and callers that hold the bytes already. `origin` names the file in errors.

use crate::dataset::Dataset;
use crate::{Checkpoint, JscTable, Result};
use std::path::Path;

/// The jet table of an HDF5 file (the compound dataset `t_allpar_new`).
pub fn jsc_hdf5(origin: &Path, bytes: &[u8]) -> Result<JscTable> {
    crate::jsc::h5::parse(origin, bytes)
}

/// The jet table in OpenML's CSV form.
pub fn jsc_csv(origin: &Path, text: &str) -> Result<JscTable> {
    crate::jsc::text::parse_csv(origin, text)
}

/// The jet table in OpenML's ARFF form.
pub fn jsc_arff(origin: &Path, text: &str) -> Result<JscTable> {
    crate::jsc::text::parse_arff(origin, text)
}

/// A scikit-learn tabular CSV (iris, wine, breast_cancer) as one unstandardised data set.
pub fn sklearn_csv(origin: &Path, text: &str) -> Result<Dataset> {
    crate::tabular::parse_dataset(origin, text)
}

/// An IDX file's dimensions and payload (`ndim` 1 for labels, 3 for images).
pub fn idx<'a>(origin: &Path, bytes: &'a [u8], ndim: u8) -> Result<(Vec<usize>, &'a [u8])> {
    crate::mnist::parse_idx(origin, bytes, ndim)
}

/// MNIST images and their labels from the bytes of the two IDX files.
pub fn mnist(images: &Path, image_bytes: &[u8], labels: &Path, label_bytes: &[u8]) -> Result<Dataset> {
    crate::mnist::parse_pair(images, image_bytes, labels, label_bytes)
}

/// The records of one CIFAR-10 batch file.
pub fn cifar_records(origin: &Path, bytes: &[u8]) -> Result<Dataset> {
    let mut out = Dataset::with_capacity(crate::cifar10::SAMPLE_SHAPE.to_vec(), 0);
    crate::cifar10::parse_records(origin, bytes, &mut out)?;
    Ok(out)
}

/// A checkpoint file's contents, checked as [`crate::load_checkpoint`] checks them.
pub fn checkpoint(origin: &Path, bytes: &[u8]) -> Result<Checkpoint> {
    crate::checkpoint::decode(origin, bytes)
}
