//! Inputs on which the fuzz targets of `fuzz/` (at the repository's root) once found a panic or an
//! unbounded allocation: every file under `tests/fixtures/fuzz/<target>/` goes to that target's
//! readers, which must refuse it with one error line naming the file, not panic.

use mase_io::parse;
use std::path::{Path, PathBuf};

/// A target's readers on one input: the error line of each reader that refused it.
type Readers = fn(&Path, &[u8]) -> Vec<Result<(), String>>;

fn line<T>(r: mase_io::Result<T>) -> Result<(), String> {
    r.map(drop).map_err(|e| e.to_string())
}

/// The readers of each target, fed as its fuzz target feeds them.
const TARGETS: &[(&str, Readers)] = &[
    ("jsc_hdf5", |p, b| vec![line(parse::jsc_hdf5(p, b))]),
    ("checkpoint", |p, b| vec![line(parse::checkpoint(p, b))]),
    ("cifar", |p, b| vec![line(parse::cifar_records(p, b))]),
    ("csv_arff", |p, b| match std::str::from_utf8(b) {
        Ok(t) => vec![line(parse::jsc_csv(p, t)), line(parse::jsc_arff(p, t)), line(parse::sklearn_csv(p, t))],
        Err(e) => vec![Err(format!("{}: not UTF-8 ({e})", p.display()))],
    }),
    ("idx", |p, b| {
        // As the target: the first byte is the length of the label file at the end.
        let Some((&cut, rest)) = b.split_first() else { return vec![Err(format!("{}: empty", p.display()))] };
        let (images, labels) = rest.split_at(rest.len().saturating_sub(cut as usize));
        vec![line(parse::mnist(p, images, p, labels)), line(parse::idx(p, rest, 3)), line(parse::idx(p, rest, 1))]
    }),
];

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz").join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|e| e.expect("directory entry").path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[test]
fn every_input_the_fuzzers_found_is_refused_with_one_line() {
    let mut checked = 0;
    for (target, readers) in TARGETS {
        for file in inputs(target) {
            let bytes = std::fs::read(&file).expect("read regression input");
            let results =
                std::panic::catch_unwind(|| readers(&file, &bytes)).unwrap_or_else(|_| panic!("{target}: {} panicked", file.display()));
            // At least one reader refuses the input (the others may read the same bytes fine,
            // e.g. a CSV that is no ARFF), and every refusal is one line naming the file.
            assert!(results.iter().any(Result::is_err), "{target}: {} was accepted", file.display());
            for e in results.iter().filter_map(|r| r.as_ref().err()) {
                assert!(!e.contains('\n') && e.contains(&*file.display().to_string()), "{target}: {e}");
            }
            checked += 1;
        }
    }
    eprintln!("{checked} regression inputs checked");
}
