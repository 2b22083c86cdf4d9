//! scikit-learn's `digits` (UCI optical digits, 1,797 images of 8x8 pixel counts 0..16), and
//! `digits-seq`, the same images read as sequences of 64 tokens.

use crate::dataset::{mod10_note, numbered_classes, split_mod10, Dataset, DatasetInfo, Splits};
use crate::files::{find_maybe_gz, gz_optional, read_text};
use crate::{IoError, NonFinite, Result};
use std::path::Path;

const FILE: &str = "digits.csv";
const PIXELS: usize = 64;

/// Parses the CSV (no header; 64 counts 0..16, then the label 0..9 per line) into `[1, 8, 8]`
/// samples scaled by 1/16. A line with a NaN or infinite pixel is refused or left out as `policy`
/// says; returns the samples and how many lines were left out.
fn parse(path: &Path, text: &str, policy: NonFinite) -> Result<(Dataset, usize)> {
    let mut d = Dataset::with_capacity(vec![1, 8, 8], 1797);
    let mut row = [0f32; PIXELS];
    let mut dropped = 0;
    'lines: for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| IoError::Parse { path: path.to_path_buf(), line: ln + 1, reason };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != PIXELS + 1 {
            return Err(bad(format!("{} fields, expected 65 (64 pixels and a label)", fields.len())));
        }
        for (k, f) in fields[..PIXELS].iter().enumerate() {
            // Values are written as integers or as floats (`0.0`) depending on the writer.
            let v: f32 = f.parse().map_err(|_| bad(format!("pixel {k}: `{f}` is not a number")))?;
            if !v.is_finite() {
                if policy == NonFinite::Drop {
                    dropped += 1;
                    continue 'lines;
                }
                let (row, column) = (format!("line {}", ln + 1), format!("pixel {k}"));
                return Err(IoError::NonFinite { path: path.to_path_buf(), row, column, value: f64::from(v) });
            }
            if !(0.0..=16.0).contains(&v) {
                return Err(bad(format!("pixel {k}: {v} is outside 0..16")));
            }
            row[k] = v / 16.0;
        }
        let label: f32 = fields[PIXELS].parse().map_err(|_| bad(format!("label `{}` is not a number", fields[PIXELS])))?;
        if !(0.0..=9.0).contains(&label) || label.fract() != 0.0 {
            return Err(bad(format!("label {label} is not a digit 0-9")));
        }
        d.push(&row, label as u32);
    }
    Ok((d, dropped))
}

/// Loads `digits/digits.csv[.gz]` from `dir` (the `digits/` folder), split by the `i % 10` rule.
pub(crate) fn load(dir: &Path, policy: NonFinite) -> Result<Splits> {
    let path = find_maybe_gz(dir, FILE).ok_or_else(|| IoError::MissingData {
        dataset: "digits".into(),
        dir: dir.to_path_buf(),
        expected: vec![gz_optional(FILE)],
    })?;
    let (all, dropped) = parse(&path, &read_text(&path)?, policy)?;
    let (train, val, test) = split_mod10(&all);
    Ok(Splits {
        info: DatasetInfo {
            name: "digits".into(),
            num_classes: 10,
            sample_shape: vec![1, 8, 8],
            class_names: numbered_classes(10),
            splits_note: mod10_note("scikit-learn digits", all.len()),
            source: path.display().to_string(),
            dropped_nonfinite: dropped,
        },
        train,
        val,
        test,
    })
}

/// The vocabulary of `digits-seq`: token ids are the pixel counts 0..16.
pub const DIGITS_SEQ_VOCAB: usize = 17;

/// `digits-seq`: the same images, splits and labels as `digits`, each read as a sequence of its
/// 64 pixels in row-major order (samples `[64]`) whose token ids are the pixel counts 0..16 as
/// whole-number floats (an `Embedding` reads them as row indices), not scaled.
pub(crate) fn load_seq(dir: &Path, policy: NonFinite) -> Result<Splits> {
    let images = load(dir, policy).map_err(|e| match e {
        IoError::MissingData { dir, expected, .. } => IoError::MissingData { dataset: "digits-seq".into(), dir, expected },
        other => other,
    })?;
    // The counts were scaled by 1/16, a power of two, so multiplying by 16 gives them back exactly.
    let tokens = |d: Dataset| Dataset { x: d.x.iter().map(|v| v * 16.0).collect(), y: d.y, sample_shape: vec![PIXELS] };
    let n = images.train.len() + images.val.len() + images.test.len();
    Ok(Splits {
        info: DatasetInfo {
            name: "digits-seq".into(),
            sample_shape: vec![PIXELS],
            splits_note: mod10_note("scikit-learn digits as 64-token sequences", n),
            ..images.info
        },
        train: tokens(images.train),
        val: tokens(images.val),
        test: tokens(images.test),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_name_the_line() {
        let p = Path::new("d.csv");
        let row = |v: &str, l: &str| format!("{},{l}", vec![v; 64].join(","));
        let ok = parse(p, &format!("{}\n\n{}\n", row("16", "3"), row("0.0", "9")), NonFinite::Refuse)
            .map(|(d, _)| (d.len(), d.y.clone(), d.x[0], d.x[64]));
        assert_eq!(ok.ok(), Some((2, vec![3, 9], 1.0, 0.0)));
        let cases = [
            (row("17", "1"), "outside 0..16"),
            (row("1", "10"), "not a digit"),
            ("1,2,3".to_string(), "3 fields"),
            (row("x", "1"), "not a number"),
            (row("nan", "1"), "column `pixel 0`: NaN is not a finite number"),
            (row("-inf", "1"), "column `pixel 0`: -inf is not a finite number"),
        ];
        for (text, want) in cases {
            let e = parse(p, &format!("{}\n{text}\n", row("1", "1")), NonFinite::Refuse).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.starts_with("d.csv, line 2") && e.contains(want), "{e}");
        }
        // Asked to, the line with a NaN pixel is left out and counted.
        let kept =
            parse(p, &format!("{}\n{}\n{}\n", row("1", "1"), row("nan", "2"), row("2", "3")), NonFinite::Drop).map(|(d, n)| (d.y, n));
        assert_eq!(kept.ok(), Some((vec![1, 3], 1)));
    }
}
