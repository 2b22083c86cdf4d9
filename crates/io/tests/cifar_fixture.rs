//! The CIFAR-10-format fixture (`tests/fixtures/cifar10/cifar-10-batches-bin/`, made by
//! `scripts/make_cifar_fixture.py`): it loads through the real reader with the official layout,
//! its splits have the sizes the hold-out rule gives, and values are the normalised bytes.

use mase_io::{load_dataset, DataOptions};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn fixture_loads_with_the_official_layout() {
    let s = load_dataset("cifar10", &DataOptions { data_dir: Some(fixtures()), ..Default::default() }).unwrap();
    // 5 x 32 training records: the last tenth (16) is the validation set; 40 test records.
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (144, 16, 40));
    assert_eq!(s.info.sample_shape, [3, 32, 32]);
    // Record k has label k % 10, in file order across the five batches.
    let (mut x, mut y) = (Vec::new(), Vec::new());
    s.train.gather(&(0..144).collect::<Vec<_>>(), &mut x, &mut y);
    assert_eq!(y, (0..144u32).map(|k| k % 10).collect::<Vec<_>>());
    s.val.gather(&(0..16).collect::<Vec<_>>(), &mut x, &mut y);
    assert_eq!(y, (144..160u32).map(|k| k % 10).collect::<Vec<_>>());
    // The first value of test record 3 is its first R byte, normalised with MASE's statistics.
    let raw = std::fs::read(fixtures().join("cifar10/cifar-10-batches-bin/test_batch.bin")).unwrap();
    let byte = raw[3 * 3073 + 1];
    s.test.gather(&[3], &mut x, &mut y);
    let want = (byte as f32 / 255.0 - 0.485) / 0.229;
    assert_eq!((x[0], y[0]), (want, raw[3 * 3073] as u32));
}
