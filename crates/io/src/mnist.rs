//! MNIST from the original IDX files (plain or gzipped).
//!
//! Pixels become `pixel / 255` in f32, as torchvision's `ToTensor`. MASE multiplies them by 255 again
//! (its "LUTNet" transform, doc/mase-semantics.md#data-vision) so that its models see values in [0, 255]; mase-rs
//! does not, because [0, 1] inputs are what every other MNIST model, and the shipped QONNX TFC model,
//! expect.

use crate::dataset::{holdout_len, mod10_note, numbered_classes, split_mod10, Dataset, DatasetInfo, Splits};
use crate::files::{find_maybe_gz, gz_optional, read_bytes, source_list};
use crate::{IoError, Result};
use std::path::Path;

const TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
const TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
const TEST_IMAGES: &str = "t10k-images-idx3-ubyte";
const TEST_LABELS: &str = "t10k-labels-idx1-ubyte";
const SIDE: usize = 28;

/// Checks an IDX header (magic `0x00 0x00 0x08 ndim`, big-endian u32 dims) and returns the dims
/// and the payload, which must have exactly the size the dims describe.
pub(crate) fn parse_idx<'a>(path: &Path, bytes: &'a [u8], ndim: u8) -> Result<(Vec<usize>, &'a [u8])> {
    let bad = |reason: String| IoError::Format { path: path.to_path_buf(), reason };
    let header = 4 + 4 * ndim as usize;
    if bytes.len() < header {
        return Err(bad(format!("file of {} bytes is too short for an IDX header", bytes.len())));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let want = 0x0800 | ndim as u32;
    if magic != want {
        return Err(bad(format!("IDX magic number {magic:#010x}, expected {want:#010x} (unsigned bytes, {ndim} dimension(s))")));
    }
    let dims: Vec<usize> = (0..ndim as usize)
        .map(|i| u32::from_be_bytes([bytes[4 + 4 * i], bytes[5 + 4 * i], bytes[6 + 4 * i], bytes[7 + 4 * i]]) as usize)
        .collect();
    let payload = &bytes[header..];
    // Dimensions are 32-bit each, so their product can overflow even a 64-bit size.
    let expected = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if expected != Some(payload.len()) {
        let need = expected.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
        return Err(bad(format!("IDX dims {dims:?} need {need} data bytes, the file has {}", payload.len())));
    }
    Ok((dims, payload))
}

/// Reads an image file and its label file into a data set of `[1, 28, 28]` samples.
fn read_pair(images: &Path, labels: &Path) -> Result<Dataset> {
    parse_pair(images, &read_bytes(images)?, labels, &read_bytes(labels)?)
}

/// The bytes of an image file and its label file as a data set of `[1, 28, 28]` samples.
pub(crate) fn parse_pair(images: &Path, img_bytes: &[u8], labels: &Path, lab_bytes: &[u8]) -> Result<Dataset> {
    let (dims, pixels) = parse_idx(images, img_bytes, 3)?;
    if dims[1..] != [SIDE, SIDE] {
        return Err(IoError::Format { path: images.to_path_buf(), reason: format!("images are {}x{}, expected 28x28", dims[1], dims[2]) });
    }
    let (ldims, labs) = parse_idx(labels, lab_bytes, 1)?;
    if ldims[0] != dims[0] {
        return Err(IoError::Format {
            path: labels.to_path_buf(),
            reason: format!("{} labels for the {} images of {}", ldims[0], dims[0], images.display()),
        });
    }
    if let Some(i) = labs.iter().position(|&l| l > 9) {
        return Err(IoError::Format { path: labels.to_path_buf(), reason: format!("label {} of item {i} is not a digit 0-9", labs[i]) });
    }
    Ok(Dataset {
        x: pixels.iter().map(|&p| p as f32 / 255.0).collect(),
        y: labs.iter().map(|&l| l as u32).collect(),
        sample_shape: vec![1, SIDE, SIDE],
    })
}

/// Loads MNIST from `dir` (the `mnist/` folder). With the full training images present: train = the
/// first images of the official training set, validation = its last 5,000, test = t10k. With only
/// t10k (what the repository ships): the `i % 10` rule over t10k.
pub(crate) fn load(dir: &Path) -> Result<Splits> {
    let (Some(test_images), Some(test_labels)) = (find_maybe_gz(dir, TEST_IMAGES), find_maybe_gz(dir, TEST_LABELS)) else {
        return Err(IoError::MissingData {
            dataset: "mnist".into(),
            dir: dir.to_path_buf(),
            expected: vec![format!(
                "{} and {} (the test set; add {} and {} for the full training set)",
                gz_optional(TEST_IMAGES),
                gz_optional(TEST_LABELS),
                gz_optional(TRAIN_IMAGES),
                gz_optional(TRAIN_LABELS)
            )],
        });
    };
    let test = read_pair(&test_images, &test_labels)?;
    let info = |splits_note: String, source: String| DatasetInfo {
        name: "mnist".into(),
        num_classes: 10,
        sample_shape: vec![1, SIDE, SIDE],
        class_names: numbered_classes(10),
        splits_note,
        source,
        dropped_nonfinite: 0,
    };
    match find_maybe_gz(dir, TRAIN_IMAGES) {
        Some(train_images) => {
            let train_labels = find_maybe_gz(dir, TRAIN_LABELS).ok_or_else(|| IoError::MissingData {
                dataset: "mnist".into(),
                dir: dir.to_path_buf(),
                expected: vec![format!("{} (found {}, whose labels it holds)", gz_optional(TRAIN_LABELS), train_images.display())],
            })?;
            let full = read_pair(&train_images, &train_labels)?;
            let n = full.len();
            let n_val = holdout_len(n);
            let train = full.subset(&(0..n - n_val).collect::<Vec<_>>());
            let val = full.subset(&(n - n_val..n).collect::<Vec<_>>());
            let note = format!(
                "official split: train = first {} of the {n} training images, validation = the last {n_val}, test = t10k ({}); \
                 MASE validates on the test set instead",
                n - n_val,
                test.len()
            );
            Ok(Splits { info: info(note, source_list(&[&train_images, &train_labels, &test_images, &test_labels])), train, val, test })
        }
        None => {
            let (train, val, test_part) = split_mod10(&test);
            let note = mod10_note("t10k only, the full training images are absent", test.len());
            Ok(Splits { info: info(note, source_list(&[&test_images, &test_labels])), train, val, test: test_part })
        }
    }
}
