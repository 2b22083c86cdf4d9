//! CIFAR-10 from the binary batches (`data_batch_1.bin` .. `data_batch_5.bin`, `test_batch.bin`), with
//! MASE's normalisation and a training augmentation.

use crate::dataset::{holdout_len, Dataset, DatasetInfo, Splits};
use crate::files::source_list;
use crate::{IoError, Result};
use mase_ir::Rng;
use std::path::{Path, PathBuf};

/// Bytes of one record: a label byte, then the R, G and B planes of 32x32 pixels.
pub const RECORD_LEN: usize = 1 + IMAGE_LEN;
/// Values of one image.
pub const IMAGE_LEN: usize = 3 * PLANE;
const SIDE: usize = 32;
const PLANE: usize = SIDE * SIDE;
/// The shape of one image.
pub(crate) const SAMPLE_SHAPE: [usize; 3] = [3, SIDE, SIDE];
/// ImageNet statistics, which MASE uses for CIFAR (doc/mase-semantics.md#data-vision), not CIFAR's own.
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];
const PAD: usize = 4;

const TRAIN_FILES: [&str; 5] = ["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"];
const TEST_FILE: &str = "test_batch.bin";

/// CIFAR-10's class names, in label order.
pub const CLASS_NAMES: [&str; 10] = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"];

/// `ToTensor` then `Normalize`, in f32 as torchvision computes it: `(p / 255 - mean) / std`.
pub fn normalize(pixel: u8, channel: usize) -> f32 {
    (pixel as f32 / 255.0 - MEAN[channel]) / STD[channel]
}

/// Parses the records of one batch file and appends them to `out`.
pub(crate) fn parse_records(path: &Path, bytes: &[u8], out: &mut Dataset) -> Result<()> {
    // `%` rather than `is_multiple_of`, which needs a newer compiler than the workspace's minimum.
    #[allow(clippy::manual_is_multiple_of)]
    let ragged = bytes.len() % RECORD_LEN != 0;
    if bytes.is_empty() || ragged {
        return Err(IoError::Format {
            path: path.to_path_buf(),
            reason: format!("{} bytes is not a whole number of {RECORD_LEN}-byte CIFAR-10 records", bytes.len()),
        });
    }
    let mut img = [0f32; IMAGE_LEN];
    for (k, rec) in bytes.chunks_exact(RECORD_LEN).enumerate() {
        let label = rec[0];
        if label > 9 {
            return Err(IoError::Format { path: path.to_path_buf(), reason: format!("record {k}: label {label} is not a class 0-9") });
        }
        for (i, v) in img.iter_mut().enumerate() {
            *v = normalize(rec[1 + i], i / PLANE);
        }
        out.push(&img, label as u32);
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| IoError::Read { path: path.to_path_buf(), source })
}

/// Loads CIFAR-10 from `dir` (the `cifar10/` folder, or its `cifar-10-batches-bin/` subfolder as the
/// official archive unpacks). Train = batches 1-5 without their last 5,000 images, which are the
/// validation set; test = `test_batch.bin`.
pub(crate) fn load(dir: &Path) -> Result<Splits> {
    let all_present = |d: &Path| TRAIN_FILES.iter().chain([&TEST_FILE]).all(|f| d.join(f).is_file());
    let root: PathBuf =
        [dir.to_path_buf(), dir.join("cifar-10-batches-bin")].into_iter().find(|d| all_present(d)).ok_or_else(|| IoError::MissingData {
            dataset: "cifar10".into(),
            dir: dir.to_path_buf(),
            expected: vec![format!("{} and {TEST_FILE} (directly or in cifar-10-batches-bin/)", TRAIN_FILES.join(", "))],
        })?;
    let train_paths: Vec<PathBuf> = TRAIN_FILES.iter().map(|f| root.join(f)).collect();
    let test_path = root.join(TEST_FILE);
    let mut full = Dataset::with_capacity(vec![3, SIDE, SIDE], 0);
    for p in &train_paths {
        parse_records(p, &read(p)?, &mut full)?;
    }
    let mut test = Dataset::with_capacity(vec![3, SIDE, SIDE], 0);
    parse_records(&test_path, &read(&test_path)?, &mut test)?;

    let n = full.len();
    let n_val = holdout_len(n);
    let l = full.sample_len();
    // Split the training set by moving its tail out instead of copying 600 MB through `subset`.
    let val = Dataset { x: full.x.split_off((n - n_val) * l), y: full.y.split_off(n - n_val), sample_shape: full.sample_shape.clone() };
    let mut sources: Vec<&Path> = train_paths.iter().map(|p| p.as_path()).collect();
    sources.push(&test_path);
    Ok(Splits {
        info: DatasetInfo {
            name: "cifar10".into(),
            num_classes: 10,
            sample_shape: vec![3, SIDE, SIDE],
            class_names: CLASS_NAMES.iter().map(|s| s.to_string()).collect(),
            splits_note: format!(
                "train = first {} of the {n} images of data_batch_1-5, validation = the last {n_val}, test = test_batch ({}); \
                 normalised with ImageNet mean/std as MASE; MASE validates on the test set instead",
                n - n_val,
                test.len()
            ),
            source: source_list(&sources),
            dropped_nonfinite: 0,
        },
        train: full,
        val,
        test,
    })
}

/// Random crop with 4 pixels of zero padding, then a horizontal flip with probability 0.5, applied in
/// place to a batch of `n` normalised `[3, 32, 32]` images (torchvision's `RandomCrop(32, padding=4)`
/// and `RandomHorizontalFlip()`, the geometric part of MASE's CIFAR training transform).
///
/// torchvision pads the raw image with 0 before normalising, so padding here uses the value a
/// 0 pixel normalises to in each channel. Per image, the draws are: crop top, crop left (each
/// uniform in 0..=8), then the flip. A stack buffer holds the source image, so nothing is allocated.
///
/// Panics when `x` does not hold `n` images (an invariant of the caller, which gathers the batch).
pub fn augment_cifar(x: &mut [f32], n: usize, rng: &mut Rng) {
    assert_eq!(x.len(), n * IMAGE_LEN, "augment_cifar: x must hold n images of 3x32x32");
    let fill: [f32; 3] = [normalize(0, 0), normalize(0, 1), normalize(0, 2)];
    let mut src = [0f32; IMAGE_LEN];
    for img in x.chunks_exact_mut(IMAGE_LEN) {
        let top = rng.below(2 * PAD as u64 + 1) as usize;
        let left = rng.below(2 * PAD as u64 + 1) as usize;
        let flip = rng.uniform() < 0.5;
        src.copy_from_slice(img);
        for c in 0..3 {
            for r in 0..SIDE {
                // Row `r` of the crop is row `r + top - PAD` of the source image.
                let sr = (r + top).checked_sub(PAD).filter(|&v| v < SIDE);
                for col in 0..SIDE {
                    let cc = if flip { SIDE - 1 - col } else { col };
                    let sc = (cc + left).checked_sub(PAD).filter(|&v| v < SIDE);
                    img[c * PLANE + r * SIDE + col] = match (sr, sc) {
                        (Some(sr), Some(sc)) => src[c * PLANE + sr * SIDE + sc],
                        _ => fill[c],
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of one image whose value at (c, r, col) encodes its position.
    fn coded() -> Vec<f32> {
        (0..IMAGE_LEN).map(|i| i as f32).collect()
    }

    #[test]
    fn normalisation_matches_torchvision_formula() {
        // (pixel, channel, (p/255 - mean)/std computed in f64)
        for &(p, c) in &[(0u8, 0usize), (255, 0), (128, 1), (37, 2)] {
            let want = (p as f64 / 255.0 - MEAN[c] as f64) / STD[c] as f64;
            assert!((normalize(p, c) as f64 - want).abs() < 1e-6, "p={p} c={c}");
        }
        assert!((normalize(0, 0) + 2.117_904).abs() < 1e-5);
    }

    #[test]
    fn augmentation_is_a_padded_crop_and_flip() {
        let src = coded();
        let mut rng = Rng::new(11);
        let mut seen_flip = [false; 2];
        let mut seen_shift = std::collections::HashSet::new();
        for _ in 0..40 {
            // Replay the draws on a clone of the generator to know what the augmentation chose.
            let mut probe = rng.clone();
            let (top, left, flip) = (probe.below(9) as usize, probe.below(9) as usize, probe.uniform() < 0.5);
            let mut x = src.clone();
            augment_cifar(&mut x, 1, &mut rng);
            assert_eq!(rng, probe, "one image uses exactly three draws");
            seen_flip[flip as usize] = true;
            seen_shift.insert((top, left));
            for c in 0..3 {
                for r in 0..SIDE {
                    for col in 0..SIDE {
                        let cc = if flip { SIDE - 1 - col } else { col } as isize;
                        let (sr, sc) = (r as isize + top as isize - 4, cc + left as isize - 4);
                        let want = if (0..32).contains(&sr) && (0..32).contains(&sc) {
                            (c * PLANE) as f32 + (sr * 32 + sc) as f32
                        } else {
                            normalize(0, c)
                        };
                        assert_eq!(x[c * PLANE + r * SIDE + col], want, "c={c} r={r} col={col} top={top} left={left} flip={flip}");
                    }
                }
            }
        }
        assert_eq!(seen_flip, [true, true]);
        assert!(seen_shift.len() > 20, "crops should vary: {}", seen_shift.len());
    }

    #[test]
    fn augmentation_handles_batches_independently() {
        let mut x: Vec<f32> = coded().into_iter().chain(coded()).collect();
        let mut rng = Rng::new(5);
        let mut probe = rng.clone();
        augment_cifar(&mut x, 2, &mut rng);
        let mut first = coded();
        augment_cifar(&mut first, 1, &mut probe);
        let mut second = coded();
        augment_cifar(&mut second, 1, &mut probe);
        assert_eq!(&x[..IMAGE_LEN], &first[..]);
        assert_eq!(&x[IMAGE_LEN..], &second[..]);
    }

    #[test]
    fn bad_record_files_are_errors() {
        let p = Path::new("b.bin");
        let mut d = Dataset::with_capacity(vec![3, 32, 32], 0);
        let e = parse_records(p, &[0u8; 100], &mut d).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("b.bin") && e.contains("not a whole number"), "{e}");
        let mut rec = vec![0u8; RECORD_LEN];
        rec[0] = 12;
        let e = parse_records(p, &rec, &mut d).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("label 12"), "{e}");
    }
}
