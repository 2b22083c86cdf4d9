//! Loading the shipped and fixture data sets through the public API.

mod common;

use common::{concat, fixtures, moments, scratch, shipped, write};
use flate2::{write::GzEncoder, Compression};
use mase_io::{data_dir, dataset_names, load_dataset, DataOptions, IoError, Splits, DATA_DIR_ENV};
use std::io::Write;
use std::path::Path;

fn load(name: &str, opts: &DataOptions) -> Splits {
    load_dataset(name, opts).unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// The message of loading data set `name` from `dir`, which must fail ("" when it loads).
fn load_error(name: &str, dir: &Path) -> String {
    load_dataset(name, &DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

fn sizes(s: &Splits) -> (usize, usize, usize) {
    (s.train.len(), s.val.len(), s.test.len())
}

#[test]
fn shipped_sets_have_expected_shapes_and_sizes() {
    // (name, sample shape, classes, (train, val, test), first train labels)
    type Case = (&'static str, &'static [usize], usize, (usize, usize, usize), &'static [u32]);
    let cases: [Case; 7] = [
        ("mnist", &[1, 28, 28], 10, (8_000, 1_000, 1_000), &[7, 2, 1, 0, 4, 1, 4, 9, 0, 6]),
        ("digits", &[1, 8, 8], 10, (1_439, 179, 179), &[0, 1, 2, 3, 4, 5, 6, 7, 0, 1]),
        ("digits-seq", &[64], 10, (1_439, 179, 179), &[0, 1, 2, 3, 4, 5, 6, 7, 0, 1]),
        ("iris", &[4], 3, (120, 15, 15), &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("wine", &[13], 3, (144, 17, 17), &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("breast_cancer", &[30], 2, (456, 57, 56), &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("toy_tiny", &[1, 2, 2], 2, (10_240, 10_240, 10_240), &[1, 1, 1, 0, 1, 1, 0, 0, 0, 1]),
    ];
    for (name, shape, classes, want, first) in cases {
        let s = load(&name.to_uppercase(), &shipped());
        assert_eq!(s.info.name, name);
        assert_eq!(sizes(&s), want, "{name}");
        assert_eq!((s.info.sample_shape.as_slice(), s.info.num_classes, s.info.class_names.len()), (shape, classes, classes), "{name}");
        for d in [&s.train, &s.val, &s.test] {
            assert_eq!(d.sample_shape, shape, "{name}");
            assert_eq!(d.x.len(), d.len() * d.sample_len(), "{name}");
            assert!(d.y.iter().all(|&l| (l as usize) < classes), "{name}");
        }
        assert_eq!(&s.train.y[..10], first, "{name}");
        assert!(!s.info.splits_note.is_empty() && !s.info.splits_note.contains('\n'), "{name}");
    }
}

#[test]
fn mnist_t10k_labels_pixels_and_counts() {
    let s = load("mnist", &shipped());
    // t10k's first ten labels are 7 2 1 0 4 1 4 9 5 9: items 8 and 9 go to validation and test.
    assert_eq!((s.val.y[0], s.test.y[0]), (5, 9));
    let mut counts = s.train.class_counts(10);
    for d in [&s.val, &s.test] {
        for (c, k) in counts.iter_mut().zip(d.class_counts(10)) {
            *c += k;
        }
    }
    assert_eq!(counts, [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);
    let all = concat(&concat(&s.train, &s.val), &s.test);
    let mean = all.x.iter().map(|&v| v as f64).sum::<f64>() / all.x.len() as f64;
    assert!((mean * 255.0 - 33.79).abs() < 0.01, "pixel mean {}", mean * 255.0);
    assert!(all.x.iter().all(|&v| (0.0..=1.0).contains(&v)));
    assert!(all.x.contains(&1.0) && all.x.contains(&0.0));
    assert!(s.info.splits_note.contains("i % 10"), "{}", s.info.splits_note);
    assert!(s.info.source.contains("t10k-images-idx3-ubyte.gz"));
}

/// An IDX file: magic, big-endian dims, payload.
fn idx(dims: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b.extend_from_slice(payload);
    b
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(bytes).unwrap_or_else(|e| panic!("gzip: {e}"));
    e.finish().unwrap_or_else(|e| panic!("gzip: {e}"))
}

#[test]
fn mnist_full_training_set_uses_official_split() {
    let dir = scratch("mnist-full");
    let m = dir.join("mnist");
    // 20 training images whose pixels all equal their index, labels i % 10; 3 test images.
    let train_px: Vec<u8> = (0..20u8).flat_map(|i| [i; 784]).collect();
    write(&m.join("train-images-idx3-ubyte"), &idx(&[20, 28, 28], &train_px));
    write(&m.join("train-labels-idx1-ubyte.gz"), &gz(&idx(&[20], &(0..20u8).map(|i| i % 10).collect::<Vec<_>>())));
    write(&m.join("t10k-images-idx3-ubyte.gz"), &gz(&idx(&[3, 28, 28], &[255u8; 3 * 784])));
    write(&m.join("t10k-labels-idx1-ubyte"), &idx(&[3], &[1, 2, 3]));
    let s = load("mnist", &DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() });
    // A small training file holds out its last tenth (2 of 20); the real one its last 5,000.
    assert_eq!(sizes(&s), (18, 2, 3));
    assert_eq!((s.val.x[0], s.val.y.clone()), (18.0 / 255.0, vec![8, 9]));
    assert_eq!(s.test.y, [1, 2, 3]);
    assert_eq!(s.test.x[0], 1.0);
    assert!(s.info.splits_note.contains("official"), "{}", s.info.splits_note);

    // Training images without their labels: the error names the labels file.
    std::fs::remove_file(m.join("train-labels-idx1-ubyte.gz")).unwrap_or_else(|e| panic!("{e}"));
    let e = load_error("mnist", &dir);
    assert!(e.contains("train-labels-idx1-ubyte[.gz]"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_idx_files_name_the_file() {
    // (images file, labels file, expected message part)
    let good_img = idx(&[2, 28, 28], &[0u8; 2 * 784]);
    let good_lab = idx(&[2], &[1, 2]);
    let cases: [(Vec<u8>, Vec<u8>, &str, &str); 6] = [
        (idx(&[2, 28], &[0u8; 56]), good_lab.clone(), "t10k-images-idx3-ubyte", "magic number 0x00000802, expected 0x00000803"),
        (idx(&[2, 28, 28], &[0u8; 100]), good_lab.clone(), "t10k-images-idx3-ubyte", "need 1568 data bytes, the file has 100"),
        (idx(&[u32::MAX; 3], &[0u8; 10]), good_lab.clone(), "t10k-images-idx3-ubyte", "need more than 2^64 data bytes, the file has 10"),
        (idx(&[2, 14, 56], &[0u8; 2 * 784]), good_lab.clone(), "t10k-images-idx3-ubyte", "expected 28x28"),
        (good_img.clone(), idx(&[3], &[1, 2, 3]), "t10k-labels-idx1-ubyte", "3 labels for the 2 images"),
        (good_img.clone(), idx(&[2], &[1, 12]), "t10k-labels-idx1-ubyte", "label 12 of item 1"),
    ];
    let dir = scratch("mnist-bad");
    for (img, lab, file, want) in cases {
        write(&dir.join("mnist/t10k-images-idx3-ubyte"), &img);
        write(&dir.join("mnist/t10k-labels-idx1-ubyte"), &lab);
        let e = load_error("mnist", &dir);
        assert!(e.contains(file) && e.contains(want), "{e}");
    }
    write(&dir.join("mnist/t10k-labels-idx1-ubyte.gz"), b"not gzip");
    std::fs::remove_file(dir.join("mnist/t10k-labels-idx1-ubyte")).unwrap_or_else(|e| panic!("{e}"));
    let e = load_error("mnist", &dir);
    assert!(e.contains("t10k-labels-idx1-ubyte.gz: bad gzip stream"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tabular_sets_are_standardised_on_train() {
    for name in ["iris", "wine", "breast_cancer"] {
        let s = load(name, &shipped());
        let (mean, std) = moments(&s.train);
        assert!(mean.iter().all(|m| m.abs() < 1e-5), "{name}: {mean:?}");
        assert!(std.iter().all(|v| (v - 1.0).abs() < 1e-5), "{name}: {std:?}");
        let (vm, _) = moments(&s.val);
        assert!(vm.iter().any(|m| m.abs() > 1e-3), "{name}: validation uses the training statistics, not its own");
    }
    // Iris rows 0 and 50 are the first setosa and versicolor; the class order comes from the header.
    let s = load("iris", &shipped());
    assert_eq!(s.info.class_names, ["setosa", "versicolor", "virginica"]);
    assert!(s.info.source.ends_with("iris.csv"));
    let w = load("wine", &shipped());
    assert!(w.info.source.ends_with("wine_data.csv"));
}

#[test]
fn digits_scaled_to_unit_range() {
    let s = load("digits", &shipped());
    let all = concat(&concat(&s.train, &s.val), &s.test);
    assert!(all.x.iter().all(|&v| (0.0..=1.0).contains(&v)));
    // The first digit image (a zero) starts 0, 0, 5, 13, 9, 1 in pixel counts.
    assert_eq!(&s.train.x[..6], [0.0, 0.0, 5.0 / 16.0, 13.0 / 16.0, 9.0 / 16.0, 1.0 / 16.0]);
    assert_eq!(all.class_counts(10).iter().sum::<usize>(), 1797);
}

#[test]
fn digits_seq_tokens_are_the_pixel_counts_of_digits() {
    let (img, seq) = (load("digits", &shipped()), load("digits-seq", &shipped()));
    // The first digit image (a zero) starts 0, 0, 5, 13, 9, 1 in pixel counts: its first tokens.
    assert_eq!(&seq.train.x[..6], [0.0, 0.0, 5.0, 13.0, 9.0, 1.0]);
    for (i, s) in [(&img.train, &seq.train), (&img.val, &seq.val), (&img.test, &seq.test)] {
        assert_eq!(s.y, i.y);
        assert!(s.x.iter().zip(&i.x).all(|(t, p)| *t == p * 16.0 && t.fract() == 0.0 && (0.0..17.0).contains(t)));
    }
    assert_eq!(mase_io::DIGITS_SEQ_VOCAB, 17);
    assert_eq!(seq.info.source, img.info.source);
}

#[test]
fn cifar10_batches_from_the_real_record() {
    let rec = std::fs::read(fixtures().join("cifar10/bnn_pynq_deer.bin")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((rec.len(), rec[0]), (3073, 1), "BNN-PYNQ's deer record carries label byte 1");
    let dir = scratch("cifar");
    let root = dir.join("cifar10/cifar-10-batches-bin");
    // Each training batch holds two copies of the record, labelled k and k + 5.
    for k in 1..=5u8 {
        let mut b = rec.clone();
        b[0] = k;
        let mut second = rec.clone();
        second[0] = (k + 5) % 10;
        b.extend(second);
        write(&root.join(format!("data_batch_{k}.bin")), &b);
    }
    write(&root.join("test_batch.bin"), &rec);
    let s = load("cifar10", &DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() });
    assert_eq!(sizes(&s), (9, 1, 1));
    assert_eq!(s.train.y, [1, 6, 2, 7, 3, 8, 4, 9, 5]);
    assert_eq!((s.val.y[0], s.test.y[0]), (0, 1));
    assert_eq!(s.info.class_names[4], "deer");
    // Red plane starts at byte 1, green at 1025, blue at 2049 of the record.
    let t = &s.test.x;
    let want = |p: u8, c: usize| (p as f32 / 255.0 - [0.485f32, 0.456, 0.406][c]) / [0.229f32, 0.224, 0.225][c];
    assert_eq!([t[0], t[2], t[1024 + 2], t[2048 + 3]], [want(0, 0), want(175, 0), want(166, 1), want(140, 2)]);
    // A record file of the wrong size is named in the error.
    write(&root.join("test_batch.bin"), &rec[..3000]);
    let e = load_error("cifar10", &dir);
    assert!(e.contains("test_batch.bin") && e.contains("3000 bytes"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_data_errors_list_expected_files() {
    let dir = scratch("empty");
    let opts = DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() };
    // (data set, expected file names in the message)
    let cases: [(&str, &[&str]); 7] = [
        ("mnist", &["t10k-images-idx3-ubyte[.gz]", "t10k-labels-idx1-ubyte[.gz]", "train-images-idx3-ubyte[.gz]"]),
        ("digits", &["digits.csv[.gz]"]),
        ("digits-seq", &["digits.csv[.gz]"]),
        ("cifar10", &["data_batch_1.bin", "data_batch_5.bin", "test_batch.bin", "cifar-10-batches-bin"]),
        (
            "jsc",
            &[
                "processed-pythia82-lhc13-all-pt1-50k-r1_h022_e0175_t220_nonu_truth.z",
                "t_allpar_new",
                "hls4ml_lhc_jets_hlf.csv",
                "hls4ml_lhc_jets_hlf.arff",
            ],
        ),
        ("iris", &["iris.csv[.gz]"]),
        ("wine", &["wine.csv[.gz]", "wine_data.csv[.gz]"]),
    ];
    for (name, files) in cases {
        // The folder each data set is read from.
        let folder = match name {
            "iris" | "wine" => "tabular",
            "digits-seq" => "digits",
            other => other,
        };
        match load_dataset(name, &opts) {
            Err(e @ IoError::MissingData { .. }) => {
                let msg = e.to_string();
                for f in files {
                    assert!(msg.contains(f), "{name}: `{f}` not in: {msg}");
                }
                assert!(msg.contains(&dir.join(folder).display().to_string()) && msg.contains(&format!("`{name}`")), "{msg}");
                assert!(msg.contains("--data-dir") && msg.contains(DATA_DIR_ENV) && !msg.contains('\n'), "{msg}");
                assert!(msg.ends_with(&format!("a folder that holds `{folder}/`")), "{msg}");
            }
            other => panic!("{name}: expected MissingData, got {other:?}"),
        }
    }
    let e = load_dataset("imagenet", &opts).err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(e, format!("unknown data set `imagenet`; known data sets: {}", dataset_names().join(", ")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn data_dir_resolution_order() {
    let explicit = DataOptions { data_dir: Some("/x/y".into()), ..Default::default() };
    std::env::set_var(DATA_DIR_ENV, "/from/env");
    assert_eq!(data_dir(&explicit), Path::new("/x/y"));
    assert_eq!(data_dir(&DataOptions::default()), Path::new("/from/env"));
    std::env::set_var(DATA_DIR_ENV, "");
    let default = data_dir(&DataOptions::default());
    std::env::remove_var(DATA_DIR_ENV);
    assert_eq!(default, data_dir(&DataOptions::default()));
    assert!(default.ends_with("crates/io/../../data"), "{}", default.display());
    assert!(default.join("mnist/t10k-labels-idx1-ubyte.gz").is_file(), "the default finds the shipped data");
}

#[test]
fn tabular_rows_with_non_finite_features_are_refused_or_dropped() {
    // An iris-shaped CSV of 12 rows with an `inf` on line 4 and a `nan` on line 9.
    let dir = scratch("tabular-nonfinite");
    let mut text = String::from("12,2,a,b\n");
    for i in 0..12 {
        let first = match i {
            2 => "inf".to_string(),
            7 => "nan".to_string(),
            _ => format!("{}.5", i),
        };
        text.push_str(&format!("{first},{},{}\n", i * 2, i % 2));
    }
    let path = dir.join("tabular").join("iris.csv");
    write(&path, text.as_bytes());
    let e = load_error("iris", &dir);
    assert!(e.starts_with(&format!("{}, line 4, column `field 1`: inf is not a finite number; ", path.display())), "{e}");
    let opts = DataOptions { data_dir: Some(dir.to_path_buf()), nonfinite: mase_io::NonFinite::Drop };
    let s = load("iris", &opts);
    assert_eq!(s.info.dropped_nonfinite, 2);
    assert_eq!(sizes(&s).0 + sizes(&s).1 + sizes(&s).2, 10);
    assert!(s.train.x.iter().chain(&s.val.x).chain(&s.test.x).all(|v| v.is_finite()));
    let _ = std::fs::remove_dir_all(&dir);
}
