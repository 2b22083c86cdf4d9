//! The jet-substructure data set from the fixtures in all three formats, checked against MASE's own
//! preprocessing (pandas + scikit-learn, written by scripts/make_jsc_fixtures.py).

mod common;

use common::{concat, fixtures, moments, scratch, write};
use mase_io::{jsc_split_indices, load_dataset, read_jsc_table, unique_rows, DataOptions, Dataset, JscTable, Splits, MASE_CACHE_NAME};
use std::path::{Path, PathBuf};

const FORMATS: [&str; 3] = ["jsc_fixture.h5", "hls4ml_lhc_jets_hlf.csv", "hls4ml_lhc_jets_hlf.arff"];

fn jsc_fixture(name: &str) -> PathBuf {
    fixtures().join("jsc").join(name)
}

fn table(name: &str) -> JscTable {
    read_jsc_table(&jsc_fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Loads jsc through `load_dataset` from a data folder whose `jsc/` holds only `file`.
fn load_only(file: &str) -> Splits {
    let dir = scratch(&format!("jsc-{file}"));
    let bytes = std::fs::read(jsc_fixture(file)).unwrap_or_else(|e| panic!("{e}"));
    write(&dir.join("jsc").join(file), &bytes);
    let s = load_dataset("jsc", &DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() })
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    s
}

struct Reference {
    x_test: Vec<f32>,
    x_train_val: Vec<f32>,
    y_test: Vec<u32>,
    y_train_val: Vec<u32>,
    n_unique: usize,
}

fn reference() -> Reference {
    let raw = std::fs::read(jsc_fixture("mase_reference.f32")).unwrap_or_else(|e| panic!("{e}"));
    let x: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(jsc_fixture("mase_reference.json")).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    let labels = |k: &str| -> Vec<u32> { serde_json::from_value(meta[k].clone()).unwrap_or_else(|e| panic!("{k}: {e}")) };
    let n_test = meta["n_test"].as_u64().unwrap_or(0) as usize;
    Reference {
        x_test: x[..n_test * 16].to_vec(),
        x_train_val: x[n_test * 16..].to_vec(),
        y_test: labels("y_test"),
        y_train_val: labels("y_train_val"),
        n_unique: meta["n_unique"].as_u64().unwrap_or(0) as usize,
    }
}

#[test]
fn three_formats_give_identical_rows() {
    let h5 = table(FORMATS[0]);
    assert_eq!(h5.len(), 2000);
    for f in &FORMATS[1..] {
        assert!(table(f) == h5, "{f} differs from the HDF5 table");
    }
    // Row 0 of the fixture: j_zlogz -2.721, class q (MASE index 1).
    assert_eq!(h5.row(0)[0], -2.721f32);
    assert_eq!(&h5.row(0)[16..], [0.0, 1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn duplicates_are_dropped_as_pandas_does() {
    let t = table(FORMATS[0]);
    let keep = unique_rows(&t);
    // 40 exact copies and one row differing only by -0.0 are dropped; a row repeating features
    // with another label stays.
    assert_eq!(keep.len(), 1959);
    assert_eq!(keep.len(), reference().n_unique);
    assert!(keep.windows(2).all(|w| w[0] < w[1]), "first occurrences, original order");
}

#[test]
fn splits_equal_mase_preprocessing_bit_for_bit() {
    let r = reference();
    for f in FORMATS {
        let s = load_only(f);
        assert_eq!((s.train.len(), s.val.len(), s.test.len()), (1410, 157, 392), "{f}");
        assert_eq!(s.test.x, r.x_test, "{f}: test features");
        assert_eq!(s.test.y, r.y_test, "{f}: test labels");
        let tv = concat(&s.train, &s.val);
        assert_eq!(tv.x, r.x_train_val, "{f}: train+val features");
        assert_eq!(tv.y, r.y_train_val, "{f}: train+val labels");
        assert_eq!((s.info.num_classes, s.info.sample_shape.as_slice()), (5, &[16usize][..]));
        assert!(s.info.splits_note.contains("1959 after dropping duplicates"), "{}", s.info.splits_note);
    }
    let i = jsc_split_indices(1959);
    assert_eq!((i.test.len(), i.train_val.len(), i.n_val), (392, 1567, 157));
}

#[test]
fn standardised_on_train_val() {
    let s = load_only(FORMATS[0]);
    let (mean, std) = moments(&concat(&s.train, &s.val));
    assert!(mean.iter().all(|m| m.abs() < 1e-5), "{mean:?}");
    assert!(std.iter().all(|v| (v - 1.0).abs() < 1e-5), "{std:?}");
}

/// Nearest class centroid: the fixture's classes must be learnable from the features.
fn centroid_accuracy(train: &Dataset, test: &Dataset) -> f64 {
    let f = train.sample_len();
    let mut c = vec![vec![0f64; f]; 5];
    let counts = train.class_counts(5);
    for i in 0..train.len() {
        for (j, &v) in train.sample(i).iter().enumerate() {
            c[train.y[i] as usize][j] += v as f64 / counts[train.y[i] as usize] as f64;
        }
    }
    let hits = (0..test.len())
        .filter(|&i| {
            let d = |k: usize| test.sample(i).iter().zip(&c[k]).map(|(&v, m)| (v as f64 - m).powi(2)).sum::<f64>();
            (0..5).min_by(|&a, &b| d(a).total_cmp(&d(b))) == Some(test.y[i] as usize)
        })
        .count();
    hits as f64 / test.len() as f64
}

#[test]
fn fixture_classes_are_learnable() {
    let s = load_only(FORMATS[1]);
    let acc = centroid_accuracy(&s.train, &s.test);
    assert!(acc > 0.8, "nearest-centroid accuracy {acc}");
    assert!(s.train.class_counts(5).iter().all(|&c| c > 200));
}

#[test]
fn source_priority_and_errors() {
    let dir = scratch("jsc-priority");
    let copy = |from: &str, to: &str| write(&dir.join("jsc").join(to), &std::fs::read(jsc_fixture(from)).unwrap_or_else(|e| panic!("{e}")));
    let opts = DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() };
    let source = || load_dataset("jsc", &opts).map(|s| s.info.source).unwrap_or_else(|e| e.to_string());
    copy(FORMATS[2], FORMATS[2]);
    assert!(source().ends_with(".arff"));
    copy(FORMATS[1], FORMATS[1]);
    assert!(source().ends_with(".csv"));
    copy(FORMATS[0], "b.h5");
    assert!(source().ends_with("b.h5"));
    // MASE's cache name (HDF5 despite `.z`) comes first; here it holds a table without `j_t`.
    copy("jsc_missing_column.h5", MASE_CACHE_NAME);
    let e = source();
    assert!(e.contains(MASE_CACHE_NAME) && e.contains("has no column `j_t`"), "{e}");
    write(&dir.join("jsc").join(MASE_CACHE_NAME), b"not an hdf5 file at all");
    let e = source();
    assert!(e.contains(MASE_CACHE_NAME) && e.contains("HDF5"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reader_errors_name_file_and_line() {
    let dir = scratch("jsc-bad");
    let header = std::fs::read_to_string(jsc_fixture(FORMATS[1])).unwrap_or_default().lines().next().unwrap_or_default().to_string();
    let row = format!("{},g", vec!["1.0"; 16].join(","));
    // (file name, content, expected message part)
    let cases = [
        ("a.csv", format!("{header}\n{row}\n{row},x\n"), "a.csv, line 3: 18 fields"),
        ("b.csv", format!("{}\n{row}\n", header.replace("j_mass_mmdt", "mass")), "b.csv, line 1: no column `j_mass_mmdt`"),
        ("c.arff", "@relation r\n@attribute j_zlogz numeric\n@data\n1.0\n".to_string(), "c.arff, line 3: no column `j_c1_b0_mmdt`"),
        ("d.arff", "@relation r\n@attribute x numeric\n".to_string(), "d.arff: no @data section"),
        ("e.arff", "@relation r\nhello\n".to_string(), "e.arff, line 2: unexpected header line"),
    ];
    for (name, text, want) in cases {
        let p = dir.join(name);
        write(&p, text.as_bytes());
        let e = read_jsc_table(&p).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(want), "{e}");
        assert!(e.starts_with(&p.display().to_string()), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _: &Path = &dir;
}

#[test]
fn non_finite_features_are_refused_with_file_line_and_column_or_dropped_on_request() {
    let text = std::fs::read_to_string(jsc_fixture(FORMATS[1])).unwrap_or_else(|e| panic!("{e}"));
    let clean = load_only(FORMATS[1]);
    let total = |s: &Splits| s.train.len() + s.val.len() + s.test.len();
    let column = text.lines().next().unwrap_or_default().split(',').nth(2).unwrap_or_default().trim_matches('"').to_string();
    // (value written into field 3 of line 5, how the message prints it)
    for (bad, shown) in [("nan", "NaN"), ("inf", "inf"), ("-inf", "-inf")] {
        let edited: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i != 4 {
                    return l.to_string();
                }
                let mut f: Vec<&str> = l.split(',').collect();
                f[2] = bad;
                f.join(",")
            })
            .collect();
        let dir = scratch(&format!("jsc-nonfinite-{bad}"));
        let path = dir.join("jsc").join(FORMATS[1]);
        write(&path, (edited.join("\n") + "\n").as_bytes());
        let refuse = DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() };
        let e = load_dataset("jsc", &refuse).map(|_| ()).unwrap_err().to_string();
        let want = format!("{}, line 5, column `{column}`: {shown} is not a finite number; ", path.display());
        assert!(e.starts_with(&want) && e.contains("--drop-nonfinite") && !e.contains('\n'), "{e}");
        let drop = DataOptions { data_dir: Some(dir.to_path_buf()), nonfinite: mase_io::NonFinite::Drop };
        let s = load_dataset("jsc", &drop).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.info.dropped_nonfinite, 1);
        assert_eq!(total(&s), total(&clean) - 1, "the fixture's rows are unique");
        assert!(s.train.x.iter().chain(&s.val.x).chain(&s.test.x).all(|v| v.is_finite()));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(clean.info.dropped_nonfinite, 0);
}

#[test]
fn non_finite_features_of_an_arff_file_are_named_by_line() {
    // The ARFF fixture with `nan` as the first value of its 3rd data row.
    let text = std::fs::read_to_string(jsc_fixture(FORMATS[2])).unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = text.lines().collect();
    let data = lines.iter().position(|l| l.trim().eq_ignore_ascii_case("@data")).unwrap_or_else(|| panic!("no @data"));
    let rows: Vec<usize> = (data + 1..lines.len()).filter(|&i| !lines[i].trim().is_empty() && !lines[i].starts_with('%')).collect();
    let at = rows[2];
    let column = lines[..data]
        .iter()
        .find(|l| l.to_ascii_lowercase().starts_with("@attribute"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .trim_matches(|c| c == '\'' || c == '"')
        .to_string();
    let edited: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| if i == at { format!("nan{}", &l[l.find(',').unwrap_or(0)..]) } else { l.to_string() })
        .collect();
    let dir = scratch("jsc-nonfinite-arff");
    let path = dir.join("jsc").join(FORMATS[2]);
    write(&path, (edited.join("\n") + "\n").as_bytes());
    let e =
        load_dataset("jsc", &DataOptions { data_dir: Some(dir.to_path_buf()), ..Default::default() }).map(|_| ()).unwrap_err().to_string();
    let want = format!("{}, line {}, column `{column}`: NaN is not a finite number", path.display(), at + 1);
    assert!(e.starts_with(&want), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
